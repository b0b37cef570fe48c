"""Results are faithful to the service (issue 33): every field it sends reaches the result with its value, metadata
written at creation is read back and found again, a list says where it shortened, which run opened a pull request
is given from data, and counts and times are worded right."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from sandboxed import connected

from agent_automation_mcp.api.models import PullRequest
from agent_automation_mcp.api.operations import OPERATIONS
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.tools import run_scan, runs
from agent_automation_mcp.tools.answers import answer_for
from agent_automation_mcp.tools.registry import TOOLSETS
from agent_automation_mcp.tools.results import instant
from catalogue import LONG_RUN, PR_ID, REPO_ID, RUN_WITH_PR


async def _raw(sandbox: SandboxServer, operation: str, **query: Any) -> Any:
    """The service's own answer, as a client of the API reads it."""
    op = OPERATIONS[operation]
    async with httpx2.AsyncClient(base_url=sandbox.url,
                                  headers={"Authorization": f"Bearer {sandbox.token}"}) as http:
        response = await http.get(op.path.format(org_id=sandbox.org_id, **query.pop("path", {})), params=query)
    response.raise_for_status()
    return response.json()


def _leaves(value: Any, path: str = "", at: tuple[int, ...] = ()) -> Iterator[tuple[str, tuple[int, ...], Any]]:
    """Each value of an answer with its field's path (`items[].id`) and the list indices on the way."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}" if path else key, at)
    elif isinstance(value, list) and value and not path.endswith("metadata"):
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[]", (*at, index))
    else:
        yield path, at, value


def _at(result: Any, path: str, at: tuple[int, ...]) -> Any:
    indices = iter(at)
    for part in path.split("."):
        name = part.rstrip("[]")
        if name:
            result = result[name]
        for _ in range(part.count("[]")):
            result = result[next(indices)]
    return result


# (tool, its arguments, the operation whose answer it shows, that operation's query)
SHOWN = [
    ("get_agent_run", {"agent_run_id": RUN_WITH_PR}, "get_agent_run", {"path": {"agent_run_id": RUN_WITH_PR}}),
    ("list_agent_runs", {"limit": 100}, "list_agent_runs", {"limit": 100}),
    ("list_organizations", {}, "list_organizations", {"limit": 100}),
    ("list_users", {"limit": 100}, "list_users", {"limit": 100}),
    ("get_user", {}, "get_current_user", {}),
    ("list_repositories", {"limit": 100}, "list_repositories", {"limit": 100}),
    ("list_integrations", {}, "list_integrations", {}),
    ("list_models", {}, "list_models", {}),
    ("get_check_suite_settings", {"repo_id": REPO_ID}, "get_check_suite_settings", {"repo_id": REPO_ID}),
    ("get_oauth_token_status", {}, "get_oauth_token_status", {"org_id": None}),
    ("get_webhook", {}, "get_webhook", {}),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "arguments", "operation", "query"), SHOWN, ids=[row[0] for row in SHOWN])
async def test_every_value_the_service_sends_is_in_the_result(tool: str, arguments: dict[str, Any], operation: str,
                                                              query: dict[str, Any]) -> None:
    async with connected(toolsets=TOOLSETS) as (client, sandbox):
        if query.get("org_id", 0) is None:
            query["org_id"] = sandbox.org_id
        result = await client.call_tool(tool, arguments)
        raw = await _raw(sandbox, operation, **query)
    assert not result.is_error, result.content[0].text
    answer = answer_for(tool, operation)
    compared = 0
    for path, at, value in _leaves(raw):
        if any(path == left or path.startswith((f"{left}.", f"{left}[]")) for left in answer.left_out):
            continue
        shown = _at(result.structured_content, answer.result_path(path), at)
        if isinstance(value, str) and instant(value) is not None and not value.isdigit():
            assert instant(shown) == instant(value), (path, at)
        else:
            assert shown == value, (path, at)
        compared += 1
    assert compared >= 3


@pytest.mark.anyio
async def test_metadata_written_at_creation_is_read_back_and_finds_the_run_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async with connected() as (client, sandbox):
        tagged = (await client.call_tool("create_agent_run", {"prompt": "Fix OPS-12", "repo_id": REPO_ID, "metadata": {
            "ticket": "OPS-12", "priority": 1}})).structured_content
        other = (await client.call_tool("create_agent_run", {"prompt": "Fix OPS-13", "repo_id": REPO_ID, "metadata": {
            "ticket": "OPS-13", "priority": True}})).structured_content
        read = (await client.call_tool("get_agent_run", {"agent_run_id": tagged["id"]})).structured_content
        found = await client.call_tool("list_agent_runs", {"metadata": {"ticket": "OPS-12"}})
        by_number = (await client.call_tool("list_agent_runs", {"metadata": {"priority": 1}})).structured_content
        nothing = (await client.call_tool("list_agent_runs", {"metadata": {"ticket": "OPS-99"}})).structured_content
        sandbox.request_log.clear()
        refused = await client.call_tool("list_agent_runs", {"metadata": {}})
        sent = [r for r in sandbox.request_log if r.operation == "list_agent_runs"]
        monkeypatch.setattr(runs, "SCAN_PAGE_SIZE", 2)
        monkeypatch.setattr(run_scan, "MAX_SCANNED_RUNS", 4)
        bounded = (await client.call_tool("list_agent_runs", {"metadata": {"ticket": "OPS-12"}, "skip": 2}))
    assert tagged["metadata"] == read["metadata"] == {"ticket": "OPS-12", "priority": 1}
    assert [run["id"] for run in found.structured_content["runs"]] == [tagged["id"]]
    assert found.structured_content["runs"][0]["metadata"] == {"ticket": "OPS-12", "priority": 1}
    assert found.content[0].text.startswith("1 run with the metadata asked (of 16 in total); read 16 runs in 1 page "
                                            "from skip 0, to the oldest run")
    assert [run["id"] for run in by_number["runs"]] == [tagged["id"]]  # true is not 1
    assert nothing["runs"] == [] and nothing["note"] == "read 16 runs in 1 page from skip 0, to the oldest run"
    assert refused.is_error and refused.structured_content["error"]["kind"] == "invalid_arguments" and not sent
    assert bounded.structured_content["runs"] == [] and bounded.structured_content["next_skip"] == 6
    assert "read 4 runs in 2 pages from skip 2, not to the oldest run" in bounded.content[0].text
    assert other["metadata"]["priority"] is True


@pytest.mark.anyio
async def test_a_list_shortens_long_metadata_says_so_and_get_agent_run_shows_it_whole() -> None:
    long = {"ticket": "OPS-7", "notes": "n" * 1000, "steps": [f"step {i}" for i in range(100)]}
    async with connected() as (client, _):
        run = (await client.call_tool("create_agent_run", {"prompt": "x", "metadata": long})).structured_content
        listed = await client.call_tool("list_agent_runs", {"limit": 3})
        whole = (await client.call_tool("get_agent_run", {"agent_run_id": run["id"]})).structured_content
    shown = listed.structured_content["runs"][0]
    assert shown["id"] == run["id"] and shown["metadata"]["ticket"] == "OPS-7"
    notes = shown["metadata"]["notes"]
    assert notes.startswith("n" * 60) and notes.endswith("[trimmed 940 chars]")
    assert len(str(shown["metadata"])) < 400
    assert listed.structured_content["note"] == (f"metadata shortened in 1 run ({run['id']}): get_agent_run shows it "
                                                 "whole")
    assert whole["metadata"] == long == run["metadata"]


@pytest.mark.anyio
async def test_a_setup_commands_run_is_told_apart_by_its_source() -> None:
    async with connected() as (client, _):
        started = (await client.call_tool("generate_setup_commands", {"repo_id": REPO_ID})).structured_content
        read = (await client.call_tool("get_agent_run", {"agent_run_id": started["agent_run_id"]})).structured_content
        listed = (await client.call_tool("list_agent_runs", {"source_type": "SETUP_COMMANDS"})).structured_content
        api = (await client.call_tool("get_agent_run", {"agent_run_id": RUN_WITH_PR})).structured_content
    assert read["source_type"] == "SETUP_COMMANDS" and api["source_type"] == "API"
    assert [run["id"] for run in listed["runs"]] == [started["agent_run_id"]]


@pytest.mark.anyio
async def test_the_runs_of_a_pull_request_say_from_data_which_could_have_opened_it() -> None:
    """A review run attached to the pull request later is listed too; only the run created by then could have
    opened it, and the pull request's own created_at is beside every run's."""
    async with connected() as (client, sandbox):
        async with httpx2.AsyncClient(base_url=sandbox.url) as control:
            review = (await control.post("/_sandbox/runs", json={
                "pull_request_id": PR_ID, "source_type": "GITHUB_PR_REVIEW", "log_entries": 3})).json()
        result = await client.call_tool("list_agent_runs", {"pull_request": PR_ID})
    out = result.structured_content
    assert [run["id"] for run in out["runs"]] == [review["id"], RUN_WITH_PR]
    assert [run["source_type"] for run in out["runs"]] == ["GITHUB_PR_REVIEW", "API"]
    prs = [run["pull_requests"][0] for run in out["runs"]]
    assert prs[0] == prs[1] and {"title", "head_branch_name", "created_at"} <= set(prs[0])
    assert prs[0]["head_branch_name"] == f"codegen-bot/run-{RUN_WITH_PR}" and prs[0]["title"]
    assert (f"the service does not say which run opened pull request pr_id {PR_ID}: it was created at "
            f"{prs[0]['created_at']}; of these, only run {RUN_WITH_PR} was created at or before it") in out["note"]
    assert "2 runs of pull request pr_id 301" in result.content[0].text


@pytest.mark.anyio
async def test_a_resumed_runs_result_counts_from_the_resume_in_its_summary_and_its_elapsed_seconds() -> None:
    async with connected(SandboxConfig(run_seconds=60)) as (client, _):
        resumed = await client.call_tool("resume_agent_run", {"agent_run_id": RUN_WITH_PR, "prompt": "one more"})
        read = (await client.call_tool("get_agent_run", {"agent_run_id": RUN_WITH_PR})).structured_content
    said = resumed.content[0].text
    went = int(re.search(r"resumed (\d+) s ago", said).group(1))  # type: ignore[union-attr]
    assert 0 <= resumed.structured_content["elapsed_seconds"] - went <= 2 < 60
    assert read["elapsed_seconds"] > 86_400  # get_agent_run gives the run's age, as its description says


@pytest.mark.anyio
async def test_counts_of_one_are_in_the_singular() -> None:
    async with connected(toolsets=TOOLSETS) as (client, _):
        said = {tool: (await client.call_tool(tool, arguments)).content[0].text for tool, arguments in {
            "list_agent_runs": {"limit": 1, "statuses": ["ERROR"]},
            "get_agent_run_logs": {"agent_run_id": LONG_RUN, "limit": 1},
            "list_repositories": {"limit": 1},
            "list_users": {"limit": 1},
            "list_organizations": {},
            "get_check_suite_settings": {"repo_id": REPO_ID},
        }.items()}
    assert said["list_agent_runs"].startswith("1 run in ERROR, FAILED, MAX_ITERATIONS_REACHED, OUT_OF_TOKENS, "
                                              "TIMEOUT (of 14 in total); next_skip=3; read 3 runs in 1 page")
    assert said["get_agent_run_logs"].startswith(f"1 entry (read 1 of 250) from run {LONG_RUN}")
    assert said["list_repositories"].startswith("1 repository (of 5)")
    assert said["list_users"].startswith("1 user (of ")
    assert said["list_organizations"].startswith("1 organisation (of 1)")
    plural = re.compile(r"\b1 (runs|entries|repositories|users|organisations|ignored checks)\b")
    assert plural.search(" ".join(said.values())) is None


def test_the_opener_note_says_what_the_data_allows_and_no_more() -> None:
    name = run_scan.PullRequestName(pr_id=7)
    later = runs.Run(id=2, is_terminal=True, web_url="https://codegen.com/agent/trace/2",
                     created_at="2025-06-21T12:00:00Z")
    earlier = later.model_copy(update={"id": 1, "created_at": "2025-06-21T10:00:00+00:00"})
    pr = PullRequest(id=7, created_at="2025-06-21 11:00:00")
    assert runs.opened_by(name, PullRequest(id=7), [later]) == (
        "the service does not say which run opened pull request pr_id 7, nor when it was created")
    assert runs.opened_by(name, pr, [later, earlier]).endswith(
        "it was created at 2025-06-21T11:00:00+00:00; of these, only run 1 was created at or before it")
    assert runs.opened_by(name, pr, [later]).endswith("none of these was created at or before it")
