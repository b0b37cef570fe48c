"""Which runs made a pull request: list_agent_runs finds them by URL, owner/repo#N or pr_id, and says how far it read
(the service filters runs by no pull request; issue 27)."""

from __future__ import annotations

from typing import Any

import pytest
from sandboxed import connected

from agent_automation_mcp.tools import run_scan, runs
from catalogue import PR_ID, RUN_WITH_PR


@pytest.mark.anyio
async def test_the_runs_of_a_pull_request_are_found_however_it_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    async with connected() as (client, sandbox):
        (pr,) = (await client.call_tool("get_agent_run", {"agent_run_id": RUN_WITH_PR})).structured_content[
            "pull_requests"]
        owner_repo = pr["url"].split("/pull/")[0].removeprefix("https://github.com/")
        found: dict[Any, Any] = {}
        for named in (pr["url"], f"{owner_repo.upper()}#{pr['number']}", PR_ID, str(PR_ID)):
            found[named] = await client.call_tool("list_agent_runs", {"pull_request": named})
        monkeypatch.setattr(runs, "SCAN_PAGE_SIZE", 2)
        monkeypatch.setattr(run_scan, "MAX_SCANNED_RUNS", 4)
        bounded = (await client.call_tool("list_agent_runs", {"pull_request": PR_ID, "skip": 2})).structured_content
        pages = len([r for r in sandbox.request_log if r.operation == "list_agent_runs"])
    for named, result in found.items():
        assert not result.is_error, named
        out = result.structured_content
        assert [run["id"] for run in out["runs"]] == [RUN_WITH_PR] and out["next_skip"] is None, named
        said = "pr_id 301" if str(named) == "301" else f"{owner_repo.lower()}#1"
        assert out["note"] == (f"read {out['total']} runs in 1 page from skip 0, to the oldest run; the service does "
                               f"not say which run opened pull request {said}: it was created at {pr['created_at']}; "
                               "of these, only run 401 was created at or before it"), named
        assert f"1 run of pull request {'pr_id 301' if str(named) == '301' else owner_repo.lower() + '#'}" \
            in result.content[0].text, named
    # From skip 2, two pages of 2 reach the bound before the run that made it (the sandbox lists 414..401).
    assert bounded["runs"] == [] and bounded["next_skip"] == 6
    assert bounded["note"] == "read 4 runs in 2 pages from skip 2, not to the oldest run: continue from next_skip"
    assert pages == 1 + 4 + 2  # get_agent_run reads the newest runs too


@pytest.mark.anyio
async def test_a_pull_request_that_is_not_one_is_refused_before_any_request() -> None:
    async with connected() as (client, sandbox):
        results = [await client.call_tool("list_agent_runs", {"pull_request": given})
                   for given in ("https://github.com/org/repo/issues/3", "org/repo", "#3", 0, True,
                                  f"https://github.com/org/{'r' * 300}/pull/3")]
        sent = [r for r in sandbox.request_log if r.operation == "list_agent_runs"]
    for result in results:
        error = result.structured_content["error"]
        assert result.is_error and error["kind"] == "invalid_arguments", error
        assert "pull_request" in error["message"]
    assert "owner/repo#7 or its pr_id" in results[0].structured_content["error"]["message"]
    assert sent == []


def test_the_description_names_the_bound_the_scan_keeps() -> None:
    assert f"≤{run_scan.MAX_SCANNED_RUNS} runs a call" in (runs.list_agent_runs.__doc__ or "")
