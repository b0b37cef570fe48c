"""Tool behaviour beyond a plain call, in memory against the sandbox: organisations, waiting, trimming, paging."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from sandboxed import connected

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer, ids
from agent_automation_mcp.sandbox.config import DEMO_TOKEN
from agent_automation_mcp.server import build_server
from agent_automation_mcp.tools import logs, run_scan, runs
from catalogue import LONG_RUN, REPO_ID


@pytest.mark.anyio
async def test_the_tokens_only_organisation_is_found_and_remembered() -> None:
    async with connected(org=False) as (client, sandbox):
        for _ in range(2):
            result = await client.call_tool("list_repositories", {"limit": 1})
            assert not result.is_error and result.structured_content["repositories"][0]["id"] == REPO_ID
        lookups = [r for r in sandbox.request_log if r.operation == "list_organizations"]
    assert len(lookups) == 1


@pytest.mark.anyio
async def test_several_organisations_without_one_configured_is_a_clear_error() -> None:
    async with connected(SandboxConfig(visible_orgs=2), org=False) as (client, sandbox):
        result = await client.call_tool("list_agent_runs", {})
        # Tools that need no organisation still work.
        assert not (await client.call_tool("list_organizations", {})).is_error
    error = result.structured_content["error"]
    assert error["kind"] == "configuration"
    assert [org["id"] for org in error["details"]["organizations"]] == [sandbox.org_id, sandbox.org_id + 1]
    assert "AGENT_AUTOMATION_ORG_ID" in error["hint"] and str(sandbox.org_id + 1) in error["message"]


@pytest.mark.anyio
async def test_a_wait_that_ends_first_returns_the_running_run() -> None:
    async with connected(SandboxConfig(run_seconds=60)) as (client, _):
        run = (await client.call_tool("create_agent_run", {"prompt": "slow", "repo_id": REPO_ID})).structured_content
        result = await client.call_tool("get_agent_run", {"agent_run_id": run["id"], "wait_seconds": 1})
    assert not result.is_error and result.structured_content["is_terminal"] is False
    assert result.structured_content["waited_seconds"] >= 1
    assert "call again" in result.content[0].text


@pytest.mark.anyio
async def test_a_wait_cut_short_by_failures_returns_the_last_status_seen() -> None:
    async with connected(SandboxConfig(run_seconds=60)) as (client, sandbox):
        run = (await client.call_tool("create_agent_run", {"prompt": "slow", "repo_id": REPO_ID})).structured_content
        results: list[Any] = []

        async def wait() -> None:
            # Past one poll interval (5 s), when the status read at the start is read again.
            results.append(await client.call_tool("get_agent_run", {"agent_run_id": run["id"], "wait_seconds": 12}))

        async with anyio.create_task_group() as group, httpx2.AsyncClient(base_url=sandbox.url) as control:
            group.start_soon(wait)
            # The first poll has answered (however long a busy machine took); every later one fails.
            reads = ("get_agent_run", "list_agent_runs")  # both ways a run's status is read
            with anyio.fail_after(20):
                while not [r for r in (await control.get("/_sandbox/requests")).json() if r["operation"] in reads]:
                    await anyio.sleep(0.05)
            await control.put("/_sandbox/faults", json={"error_rate": 1.0, "operations": list(reads)})
    (result,) = results
    assert not result.is_error and result.structured_content["status"] == run["status"]
    assert "server_error" in result.structured_content["note"] and "last status seen" in result.content[0].text


@pytest.mark.anyio
async def test_long_values_are_trimmed_with_a_marker() -> None:
    async with connected(max_field_chars=100) as (client, _):
        page = (await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN})).structured_content
    assert page["trimmed_fields"] > 0
    trimmed = [value for entry in page["entries"] for value in entry.values()
               if isinstance(value, str) and "…[trimmed " in value]
    assert len(trimmed) == page["trimmed_fields"]
    for value in trimmed:
        head, _, marker = value.partition("…[trimmed ")
        assert len(head) == 100 and marker.endswith(" chars]") and int(marker.split()[0]) > 0


@pytest.mark.anyio
async def test_message_type_filter_and_reverse() -> None:
    async with connected() as (client, _):
        errors = (await client.call_tool("get_agent_run_logs", {
            "agent_run_id": LONG_RUN, "message_types": ["ERROR", "FINAL_ANSWER"], "all_pages": True,
        })).structured_content
        newest = (await client.call_tool("get_agent_run_logs", {
            "agent_run_id": LONG_RUN, "limit": 1, "reverse": True})).structured_content
    assert errors["entries"] and {e["message_type"] for e in errors["entries"]} <= {"ERROR", "FINAL_ANSWER"}
    assert errors["read"] == errors["total_logs"] and errors["next_skip"] is None
    assert newest["entries"][0]["message_type"] in {"FINAL_ANSWER", "ERROR"} and newest["next_skip"] == 1


@pytest.mark.anyio
async def test_all_pages_stops_at_its_budget_and_says_where_to_continue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "MAX_ENTRIES", 120)
    async with connected() as (client, _):
        capped = (await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN, "limit": 50,
                                                               "all_pages": True})).structured_content
        monkeypatch.setattr(logs, "PAGING_SECONDS", 0.0)
        timed = (await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN, "limit": 50,
                                                              "all_pages": True})).structured_content
    assert capped["next_skip"] == 120 and len(capped["entries"]) == 120 and "next_skip" in capped["note"]
    assert timed["next_skip"] == 50 and len(timed["entries"]) == 50 and "stopped after" in timed["note"]


@pytest.mark.anyio
async def test_a_call_returns_at_most_its_character_budget_and_continues_where_it_stopped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "MAX_RESULT_CHARS", 3000)
    async with connected() as (client, _):
        first = (await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN})).structured_content
        second = (await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN,
                                                               "skip": first["next_skip"]})).structured_content
        seam = (await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN, "limit": 2,
                                                              "skip": first["next_skip"] - 1})).structured_content
    def size(entry: dict[str, Any]) -> int:
        return len(json.dumps(entry, separators=(",", ":"), ensure_ascii=False))

    returned = sum(size(entry) for entry in first["entries"])
    assert 0 < returned <= 3000 < returned + size(second["entries"][0]) and "characters" in first["note"]
    assert first["next_skip"] == first["read"] == len(first["entries"]) < 100
    assert seam["entries"] == [first["entries"][-1], second["entries"][0]]  # nothing skipped, nothing twice


@pytest.mark.anyio
async def test_a_rate_limit_beyond_the_deadline_answers_with_retry_after() -> None:
    limits = "agent_creation=1/60s"
    async with connected(SandboxConfig(rate_limits=parse_rate_limits(limits)), rate_limits=limits) as (client, _):
        first = await client.call_tool("create_agent_run", {"prompt": "one", "repo_id": REPO_ID})
        second = await client.call_tool("create_agent_run", {"prompt": "two", "repo_id": REPO_ID})
    assert not first.is_error
    error = second.structured_content["error"]
    assert error["kind"] == "rate_limited" and 0 < error["retry_after_seconds"] <= 61
    assert "Retry after" in second.content[0].text


@pytest.mark.anyio
async def test_pull_requests_of_runs_carry_the_id_edit_pull_request_takes() -> None:
    async with connected() as (client, _):
        run = (await client.call_tool("get_agent_run", {"agent_run_id": 401})).structured_content
        pr_id = run["pull_requests"][0]["pr_id"]
        edited = await client.call_tool("edit_pull_request", {"pr_id": pr_id, "state": "draft"})
    assert not edited.is_error and edited.structured_content["state"] == "draft"


@pytest.mark.anyio
async def test_message_types_take_any_short_identifier_in_any_case() -> None:
    """The service's message type is an open string: a type newer than the documented 13 is a filter, not an error."""
    async with connected() as (client, _):
        errors = await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN, "message_types": ["error"],
                                                                "all_pages": True})
        newer = await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN,
                                                               "message_types": ["TOOL_APPROVAL_2027"]})
        junk = await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN, "message_types": ["a b"]})
    kinds = {entry["message_type"] for entry in errors.structured_content["entries"]}
    assert kinds == {"ERROR"}
    assert not newer.is_error and newer.structured_content["entries"] == []
    assert junk.is_error and junk.structured_content["error"]["kind"] == "invalid_arguments"


PNG = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9aw"
       "AAAABJRU5ErkJggg==")


@pytest.mark.anyio
async def test_a_run_is_created_with_the_services_metadata_and_images() -> None:
    async with connected() as (client, sandbox):
        created = await client.call_tool("create_agent_run", {"prompt": "Look at this", "repo_id": REPO_ID,
                                                              "metadata": {"ticket": "ENG-7", "priority": 2},
                                                              "images": [PNG]})
        too_big = await client.call_tool("create_agent_run", {"prompt": "x", "metadata": {"k": "v" * 5000}})
        not_an_image = await client.call_tool("create_agent_run", {"prompt": "x", "images": ["https://x/y.png"]})
        run = sandbox.state.world.runs[created.structured_content["id"]]
    assert run.metadata == {"ticket": "ENG-7", "priority": 2} and run.images == [PNG]
    for refused in (too_big, not_an_image):
        assert refused.is_error and refused.structured_content["error"]["kind"] == "invalid_arguments"
    assert len([r for r in sandbox.request_log if r.operation == "create_agent_run"]) == 1


@pytest.mark.anyio
async def test_runs_filtered_by_status_here_page_on_within_a_bound_and_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """The service has no status filter: pages are read until the count, the end or the bound (newest first, the
    sandbox's seeded runs are 414..401; 404 ended in ERROR, 410..412 out of a limit, which "error" finds too)."""
    async with connected() as (client, _):
        failed = (await client.call_tool("list_agent_runs", {"statuses": ["error", "FAILED"], "limit": 5}))
        monkeypatch.setattr(runs, "SCAN_PAGE_SIZE", 2)
        monkeypatch.setattr(run_scan, "MAX_SCANNED_RUNS", 4)
        bounded = (await client.call_tool("list_agent_runs", {"statuses": ["timeout"], "limit": 1})).structured_content
        onwards = (await client.call_tool("list_agent_runs", {"statuses": ["timed out"], "limit": 1,
                                                              "skip": bounded["next_skip"]})).structured_content
    assert [run["id"] for run in failed.structured_content["runs"]] == [
        ids.OUT_OF_TOKENS_RUN_ID, ids.MAX_ITERATIONS_RUN_ID, ids.TIMEOUT_RUN_ID, ids.ERROR_RUN_ID]
    assert failed.structured_content["next_skip"] is None
    assert "4 runs in ERROR, FAILED, MAX_ITERATIONS_REACHED, OUT_OF_TOKENS, TIMEOUT" in failed.content[0].text
    assert bounded["runs"] == [] and bounded["next_skip"] == 4 and "read 4 runs" in bounded["note"]
    assert [run["id"] for run in onwards["runs"]] == [ids.TIMEOUT_RUN_ID] and onwards["next_skip"] == 5


@pytest.mark.anyio
async def test_a_run_list_stays_within_its_character_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs, "PAGE_ITEMS_CHARS", 1500)
    async with connected() as (client, _):
        first = (await client.call_tool("list_agent_runs", {"limit": 9})).structured_content
        rest = (await client.call_tool("list_agent_runs", {"skip": first["next_skip"]})).structured_content
    size = sum(len(json.dumps(run, separators=(",", ":"))) for run in first["runs"])
    assert 0 < len(first["runs"]) < 9 and size <= 1500 and "characters" in first["note"]
    assert first["next_skip"] == len(first["runs"])
    assert rest["runs"][0]["id"] == ids.STUCK_RUN_ID - len(first["runs"])  # counted down from the newest seeded run


@pytest.mark.anyio
async def test_an_organisation_the_token_does_not_belong_to_is_said_so_not_marked() -> None:
    config = SandboxConfig(visible_orgs=2, token_orgs={DEMO_TOKEN: (1,)})
    async with SandboxServer(config) as sandbox:
        api = ApiSettings(token=sandbox.token, org_id=2, base_url=sandbox.url)
        async with Client(build_server(api, ServerSettings())) as client:
            told = client.instructions or ""
            listed = await client.call_tool("list_organizations", {})
    assert "set to organisation 2, which this API token does not belong to" in told
    assert 'the token belongs to 1 "Sandbox Org"' in told and "AGENT_AUTOMATION_ORG_ID" in told
    assert [org["in_use"] for org in listed.structured_content["organizations"]] == [False]
    assert listed.content[0].text.endswith("this connection is set to organisation 2, which is not among them")
