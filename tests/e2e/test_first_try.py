"""Issues 19 and 47: a request a user types gets a true answer on the first try.

The real command over stdio, the SDK's client, the sandbox over loopback: what a write reports is what the service
said it did, status filters take the words people use, results carry the facts people ask for, descriptions steer a
model right, and the default `tools/list` fits the context budget (`tests/budget.py`).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from harness import RATE_LIMITS, error_of, sandbox_env, stdio_server
from mcp import Client, MCPError

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer, ids
from agent_automation_mcp.tools.checks import CLOSEST_TO_CANCEL
from agent_automation_mcp.tools.declarations import CLOSEST_TO_STOP_SAYS
from agent_automation_mcp.toolsets import OPT_IN_TOOLSETS
from budget import BUDGET_TOKENS, Measure
from catalogue import CASES, ENDS_WITH_REASON, LONG_RUN, PR_ID, REPO_ID, RUN_WITH_PR

RUN_WITHOUT_PR, ERROR_RUN, PAUSED_RUN = ids.RUN_WITHOUT_PR_ID, ids.ERROR_RUN_ID, ids.PAUSED_RUN_ID


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module-wide, so one server process serves the module


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    # Runs started here stay ACTIVE for the module's length: "which runs are still running" has answers.
    config = SandboxConfig(run_seconds=300.0, seed=3, rate_limits=parse_rate_limits(RATE_LIMITS))
    with SandboxServer(config) as server:
        yield server


@pytest.fixture(scope="module")
async def client(sandbox: SandboxServer) -> AsyncIterator[Client]:
    async with Client(stdio_server(sandbox_env(sandbox, AGENT_AUTOMATION_TOOLSETS="all"))) as connected:
        yield connected


def _described(tools: dict[str, Any], name: str) -> str:
    """A tool's description as one line (docstrings wrap where their source does)."""
    return " ".join((tools[name].description or "").split())


async def _call(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content or {}, result.content[0].text


# -- 1. Never claim an effect the service did not report ---------------------------------------------------------

@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "verb"), [("ban_checks", "banned"), ("unban_checks", "unbanned"),
                                            ("remove_from_pull_request", "removed")])
async def test_a_run_without_a_pull_request_gets_nothing_done_not_a_success(client: Client, tool: str,
                                                                             verb: str) -> None:
    out, summary = await _call(client, tool, {"agent_run_id": RUN_WITHOUT_PR})
    assert out["done"] is False and out["pull_request_id"] is None
    assert summary.startswith(f"Nothing {verb}:"), summary
    assert "were stopped" not in summary and "for the pull request of" not in summary


@pytest.mark.anyio
async def test_ban_and_unban_name_the_pull_request_and_the_runs_the_service_reports(client: Client) -> None:
    banned, summary = await _call(client, "ban_checks", {"agent_run_id": RUN_WITH_PR})
    assert banned["done"] is True and banned["pull_request_id"] == PR_ID
    assert banned["stopped_agent_run_ids"] == banned["response"]["stopped_agent_run_ids"]
    assert f"pull request pr_id {PR_ID}" in summary and "stopped no run" in summary  # 401's run had finished
    unbanned, summary = await _call(client, "unban_checks", {"agent_run_id": RUN_WITH_PR})
    assert unbanned["done"] is True and summary.startswith(f"Checks unbanned on pull request pr_id {PR_ID}")


@pytest.mark.anyio
async def test_update_check_suite_settings_says_what_changed_and_what_was_already_so(client: Client) -> None:
    before, _ = await _call(client, "get_check_suite_settings", {"repo_id": REPO_ID})
    count = before["check_retry_count"]
    out, summary = await _call(client, "update_check_suite_settings",
                               {"repo_id": REPO_ID, "check_retry_count": count, "ignored_checks": ["lint-x"]})
    assert out["already"] == ["check_retry_count"] and out["changed"] == ["ignored_checks"]
    assert "changed ignored_checks" in summary and "already so (left as they were): check_retry_count" in summary
    out, summary = await _call(client, "update_check_suite_settings", {"repo_id": REPO_ID, "check_retry_count": count})
    assert out["changed"] == [] and summary.startswith(f"Repository {REPO_ID}: changed nothing")


@pytest.mark.anyio
async def test_set_webhook_without_a_secret_says_the_secret_was_removed(client: Client) -> None:
    signed, summary = await _call(client, "set_webhook", {"url": "https://example.com/a", "secret": "s3cret-value"})
    assert signed["has_secret"] is True and not signed["secret_removed"] and "deliveries are signed" in summary
    out, summary = await _call(client, "set_webhook", {"url": "https://example.com/b"})
    assert out["has_secret"] is False and out["secret_removed"] is True
    assert "secret was REMOVED: deliveries are now unsigned" in summary
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert "removed and deliveries go unsigned" in _described(tools, "set_webhook")


# -- 2. Filters a model can guess --------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_status_words_people_use_find_the_runs(client: Client) -> None:
    started = [(await _call(client, "create_agent_run", {"prompt": f"Task {i}", "repo_id": REPO_ID}))[0]["id"]
               for i in range(2)]
    for words in (["running"], ["In progress"], ["active"]):
        out, summary = await _call(client, "list_agent_runs", {"statuses": words})
        assert set(started) <= {run["id"] for run in out["runs"]}, (words, summary)
        assert {run["status"] for run in out["runs"]} == {"ACTIVE"}
    failed, _ = await _call(client, "list_agent_runs", {"statuses": ["failed"]})
    assert ERROR_RUN in {run["id"] for run in failed["runs"]}
    assert {r["status"] for r in failed["runs"]} == {"ERROR", *ENDS_WITH_REASON}
    done, _ = await _call(client, "list_agent_runs", {"statuses": ["Done"], "limit": 100})
    assert RUN_WITH_PR in {run["id"] for run in done["runs"]}


@pytest.mark.anyio
async def test_no_match_says_which_statuses_the_runs_have(client: Client) -> None:
    out, summary = await _call(client, "list_agent_runs", {"statuses": ["queued"]})  # nothing is PENDING here
    assert out["runs"] == [] and "none of the" in out["note"] and "COMPLETE" in out["note"] and "COMPLETE" in summary
    schema = {tool.name: tool for tool in (await client.list_tools()).tools}["list_agent_runs"].input_schema
    listed = schema["properties"]["statuses"]["description"]
    assert all(value in listed for value in ("ACTIVE", "COMPLETE", "ERROR", "STOPPED", "PAUSED", "TIMEOUT",
                                             "OUT_OF_TOKENS", "MAX_ITERATIONS_REACHED", "paused")), listed
    paused, _ = await _call(client, "list_agent_runs", {"statuses": ["paused"]})
    assert [run["id"] for run in paused["runs"]] == [PAUSED_RUN]


@pytest.mark.anyio
async def test_a_filtered_trace_read_follows_the_pages_by_itself(client: Client) -> None:
    every: list[dict[str, Any]] = []
    skip: int | None = 0
    while skip is not None and len(every) < 1000:
        page, _ = await _call(client, "get_agent_run_logs", {"agent_run_id": LONG_RUN, "skip": skip})
        every += page["entries"]
        skip = page["next_skip"]
    actions = [entry for entry in every if entry.get("message_type") == "ACTION"]
    out, summary = await _call(client, "get_agent_run_logs", {"agent_run_id": LONG_RUN, "message_types": ["action"]})
    assert out["read"] == out["total_logs"] == len(every) > 100 and out["next_skip"] is None
    assert len(out["entries"]) == len(actions) and f"read {len(every)} of {len(every)}" in summary


# -- 3. Facts people ask for -------------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_a_running_run_says_how_long_it_has_been_going(client: Client) -> None:
    started, _ = await _call(client, "create_agent_run", {"prompt": "Time me", "repo_id": REPO_ID})
    run, summary = await _call(client, "get_agent_run", {"agent_run_id": started["id"]})
    assert run["is_terminal"] is False and 0 <= run["elapsed_seconds"] < 60
    assert "created" in summary and "(server clock)" in summary
    finished, _ = await _call(client, "get_agent_run", {"agent_run_id": RUN_WITH_PR})
    assert finished["elapsed_seconds"] is None  # the service reports no end time: no made-up duration


@pytest.mark.anyio
async def test_edit_pull_request_by_repository_and_github_number(client: Client) -> None:
    run, _ = await _call(client, "get_agent_run", {"agent_run_id": RUN_WITH_PR})
    (pr,) = run["pull_requests"]
    out, summary = await _call(client, "edit_pull_request",
                               {"repo_id": REPO_ID, "number": pr["number"], "state": "draft"})
    assert out["pr_id"] == PR_ID and out["state"] == "draft" and "is now draft" in summary
    out, _ = await _call(client, "edit_pull_request", {"pr_url": pr["url"], "state": "open"})
    assert out["pr_id"] == PR_ID and out["state"] == "open"


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "arguments", "listing"), [
    ("get_agent_run", {"agent_run_id": 999_999}, "list_agent_runs"),
    ("ban_checks", {"agent_run_id": 999_999}, "list_agent_runs"),
    ("get_check_suite_settings", {"repo_id": 999_999}, "list_repositories"),
    ("get_user", {"user_id": 999_999}, "list_users"),
])
async def test_not_found_names_the_tool_that_lists_valid_ids(client: Client, tool: str, arguments: dict[str, Any],
                                                             listing: str) -> None:
    error = error_of(await client.call_tool(tool, arguments))
    assert error["kind"] == "not_found" and listing in error["hint"] and "list the resources" not in error["hint"]


@pytest.mark.anyio
async def test_descriptions_say_what_the_service_cannot_tell(client: Client) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert "does not report a pull request's state" in _described(tools, "get_agent_run")
    assert "who started a run" in _described(tools, "get_agent_run")
    assert "by this server's clock" in _described(tools, "get_agent_run")
    sandbox_id = tools["analyze_sandbox_logs"].input_schema["properties"]["sandbox_id"]["description"]
    assert "web app" in sandbox_id and "no tool lists sandboxes" in sandbox_id
    error = error_of(await client.call_tool("analyze_sandbox_logs", {"sandbox_id": 999_999}))
    assert "web app" in error["hint"]


# -- 4. Descriptions that steer a model right --------------------------------------------------------------------

@pytest.mark.anyio
async def test_destructive_tools_act_only_on_explicit_request_and_say_what_is_closest_to_cancel(
        client: Client) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    destructive = [name for name, tool in tools.items() if tool.annotations and tool.annotations.destructive_hint]
    assert destructive == [case.name for case in CASES if case.destructive]
    for name in destructive:
        assert "Only on the user's explicit request" in _described(tools, name), name
    removal = _described(tools, "remove_from_pull_request")
    assert "the same as ban_checks" in removal and "unban_checks reverses" in removal
    closest = [name for name in tools if CLOSEST_TO_STOP_SAYS in _described(tools, name)]
    assert closest == ([CLOSEST_TO_CANCEL] if CLOSEST_TO_CANCEL else [])  # none once an operation stops a run


@pytest.mark.anyio
async def test_default_server_names_its_off_toolsets_and_fits_the_budget(sandbox: SandboxServer) -> None:
    async with Client(stdio_server(sandbox_env(sandbox))) as default:
        text = default.instructions or ""
        listed = [tool.model_dump(mode="json", by_alias=True, exclude_none=True)
                  for tool in (await default.list_tools()).tools]
    assert f"Toolsets off on this server: {', '.join(OPT_IN_TOOLSETS)}" in text and "--toolsets" in text
    measured = Measure(listed).model_tokens
    assert measured <= BUDGET_TOKENS, (
        f"the default tools cost {measured} tokens over stdio, over the budget of {BUDGET_TOKENS}: "
        "tests/tools/test_registry.py::test_default_tools_list_fits_the_context_budget lists each tool's cost")
    names = {tool["name"]: tool["outputSchema"] for tool in listed}
    # The outline still says where a pull request's pr_id is.
    assert "pr_id" in names["get_agent_run"]["properties"]["pull_requests"]["items"]["properties"]


# -- 5. What users ask after a run (issue 47), as benchmarks/first_try.py's model reads it --------------------------

def _cannot(instructions: str, verb: str, target: str) -> str:
    """The instructions' sentence on what the service cannot do to `target`, naming `verb` (first_try's reading)."""
    return next(part for part in " ".join(instructions.split()).split(". ")
                if "cannot" in part and verb in part.split(":")[0] and target in part.split(":")[0])


@pytest.mark.anyio
async def test_the_instructions_say_what_the_service_cannot_do_and_the_closest_thing(client: Client) -> None:
    told = client.instructions or ""
    for verb in ("merge", "approve", "comment on", "request reviewers", "re-run the checks"):
        assert "the user does that in GitHub at the pull request's url" in _cannot(told, verb, "pull request"), verb
    assert "every run stays listed" in _cannot(told, "delete", "agent run")
    assert "resume_agent_run sends the run a follow-up instruction" in _cannot(told, "change the prompt", "agent run")


@pytest.mark.anyio
async def test_merging_is_refused_with_where_to_merge_and_nothing_is_closed(client: Client,
                                                                           sandbox: SandboxServer) -> None:
    before = len(sandbox.request_log)
    result = await client.call_tool("edit_pull_request", {"repo_id": 202, "number": 2, "state": "merged"})
    error = error_of(result)
    assert 'asked "merged": the service cannot merge a pull request' in error["message"]
    assert "GitHub" in error["hint"] and "closed is not merged" in error["hint"]
    assert sandbox.request_log[before:] == []  # refused before any request: nothing closed
    if CLOSEST_TO_CANCEL is not None:  # while no operation stops a run, a guessed stop is refused with the closest
        with pytest.raises(MCPError) as guessed:
            await client.call_tool("cancel_agent_run", {"agent_run_id": RUN_WITHOUT_PR})
        said = str(guessed.value)
        assert "No tool can stop an agent run: the service cannot" in said and CLOSEST_TO_CANCEL in said


@pytest.mark.anyio
async def test_a_map_change_says_its_values_and_a_list_explains_its_short_times(client: Client) -> None:
    await _call(client, "update_check_suite_settings", {"repo_id": REPO_ID, "check_retry_counts": {"unit-tests": 1}})
    _, summary = await _call(client, "update_check_suite_settings",
                             {"repo_id": REPO_ID, "check_retry_counts": {"build": 3, "unit-tests": 2}})
    assert "added build: 3" in summary and "changed unit-tests: 1 → 2" in summary
    listed = await client.call_tool("list_agent_runs", {"limit": 100})
    lines = listed.content[1].text.split("\n")
    legend = next(line for line in lines if line.startswith("runs, one a line"))
    assert any(re.fullmatch(r":\d\d|\d\d:\d\d:\d\d", line.split()[2]) for line in lines[lines.index(legend) + 1:])
    assert "HH:MM:SS on the day of the time written before it, :SS in its minute" in legend


@pytest.mark.anyio
async def test_explain_run_failure_starts_from_the_digest_and_says_when_the_repository_is_unknown(
        client: Client) -> None:
    prompt = (await client.get_prompt("explain_run_failure", {"agent_run_id": str(ERROR_RUN)})).messages[0]
    plan = " ".join(prompt.content.text.split())  # type: ignore[union-attr]
    assert f"agent_run_id {ERROR_RUN} and digest true" in plan and "does not report a run's repository" in plan
    digest, summary = await _call(client, "get_agent_run_logs", {"agent_run_id": ERROR_RUN, "digest": True})
    assert digest["digest"] is not None and summary.startswith(f"Digest of run {ERROR_RUN}")


# -- 6. A day's runs at a glance and tags as people type them (issue 47, part two), as first_try's model reads them --

@pytest.mark.anyio
async def test_a_sprint_tagged_by_two_scripts_is_found_whole(client: Client) -> None:
    tagged = [(await _call(client, "create_agent_run", {"prompt": f"Sprint {value!r}", "repo_id": REPO_ID,
                                                        "metadata": {"sprint": value}}))[0]["id"]
              for value in (14, "14", 15)]
    found, _ = await _call(client, "list_agent_runs", {"metadata": {"sprint": 14}, "limit": 100})
    assert sorted(run["id"] for run in found["runs"] if run["id"] in tagged) == sorted(tagged[:2])


@pytest.mark.anyio
async def test_how_many_runs_today_is_one_short_answer_bound_to_the_users_day() -> None:
    config = SandboxConfig(run_seconds=300.0, recent_runs=192, rate_limits=parse_rate_limits(RATE_LIMITS))
    with SandboxServer(config) as day:
        async with Client(stdio_server(sandbox_env(day))) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            start = (datetime.now(UTC) - timedelta(hours=16)).astimezone(timezone(timedelta(hours=-7)))
            result = await client.call_tool("list_agent_runs", {"since": start.isoformat(), "counts": True})
    schema = tools["list_agent_runs"].input_schema["properties"]
    assert "UTC offset" in schema["since"]["description"] and "repository" in schema["counts"]["description"]
    counts = result.structured_content["counts"]
    assert counts["runs"] == 128 and sum(repo["runs"] for repo in counts["by_repository"]) >= 128
    assert counts["by_status"]["failed"] == sum(repo["failed"] for repo in counts["by_repository"]) > 0
    bound = f"{start.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
    assert result.content[0].text.startswith(f"Counted 128 runs created since {bound} (UTC; ")
    assert sum(len(block.text) for block in result.content) // 4 <= 800


@pytest.mark.anyio
async def test_a_run_starts_on_the_chats_repository_when_a_default_is_set(sandbox: SandboxServer) -> None:
    async with Client(stdio_server(sandbox_env(sandbox, AGENT_AUTOMATION_REPO_ID="202"))) as bound:
        told = " ".join((bound.instructions or "").split())
        run, summary = await _call(bound, "create_agent_run", {"prompt": "Add a health endpoint"})
    assert re.search(r"default repository is 202 \("  # the model reads which, by its name too
                     r"\"sandbox-org/api-service\"\), set by AGENT_AUTOMATION_REPO_ID", told), told
    assert sandbox.state.world.runs[run["id"]].repo_id == 202 and "this connection's default" in summary
