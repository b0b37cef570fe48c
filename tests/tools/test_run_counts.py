"""A day's runs in one short answer (issue 47): `list_agent_runs` reads back to a time (since, or the last N hours),
newest first, stopping there, and with `counts` answers how many by status, source and repository and which failed,
in at most 800 tokens for any number of runs, saying which instant it read back to (UTC) and how far it looked."""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sandboxed import connected, service_pages, text_tokens

from agent_automation_mcp.api.models import AgentRun
from agent_automation_mcp.api.statuses import status_of
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.sandbox.seed import RECENT_HOURS
from agent_automation_mcp.tools import run_scan, runs
from agent_automation_mcp.tools.run_counts import COUNTS_TOKENS, RunCounter, render_counts
from agent_automation_mcp.tools.run_filters import RunFilter
from agent_automation_mcp.tools.runs import RunList

DAY = 192  # runs over the day before the sandbox starts: 128 of them in the last 16 hours
USER_ZONE = timezone(timedelta(hours=-7))  # the caller's: "today" is theirs


def _day() -> SandboxConfig:
    return SandboxConfig(run_seconds=600.0, recent_runs=DAY)


def _created(run: dict[str, Any]) -> datetime:
    moment = datetime.fromisoformat(run["created_at"])
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _service_runs(sandbox: SandboxServer) -> list[dict[str, Any]]:
    return service_pages(sandbox, "/v1/organizations/{org_id}/agent/runs", "items", "total")


def _expected(service: list[dict[str, Any]], since: datetime) -> dict[str, Any]:
    """What a person counting the service's runs created since `since` finds, by the status table's words."""
    day = [run for run in service if _created(run) >= since]
    failed = [run for run in day if (known := status_of(run["status"])) is not None and known.kind.failed]
    repositories: Counter[str | None] = Counter()
    for run in day:
        named = {pr["url"].removeprefix("https://github.com/").split("/pull/")[0]
                 for pr in run.get("github_pull_requests") or []}
        repositories.update(named or {None})
    return {"runs": len(day), "by_status": Counter(status_of(run["status"]).kind.word for run in day),  # type: ignore[union-attr]
            "by_source": Counter(run["source_type"] for run in day), "failed": [run["id"] for run in failed],
            "by_repository": repositories}


@pytest.mark.anyio
async def test_a_days_runs_are_counted_in_one_short_answer_that_stops_at_the_time_asked() -> None:
    async with connected(_day()) as (client, sandbox):
        service = _service_runs(sandbox)
        since = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=16)
        sandbox.request_log.clear()
        result = await client.call_tool("list_agent_runs", {"since": since.astimezone(USER_ZONE).isoformat(),
                                                            "counts": True})
        reads = [r for r in sandbox.request_log if r.operation == "list_agent_runs"]
    assert not result.is_error, result.content[0].text
    out = result.structured_content
    counts, want = out["counts"], _expected(service, since)
    assert counts["runs"] == want["runs"] == 128 and out["runs"] == []
    assert counts["by_status"] == dict(want["by_status"]) and counts["by_source"] == dict(want["by_source"])
    assert {repo["repository"]: repo["runs"] for repo in counts["by_repository"]} == dict(want["by_repository"])
    assert counts["other_repositories"] == 0 and None in want["by_repository"]  # runs with no pull request
    named = [run["id"] for run in counts["failed"]]
    assert named == want["failed"][:len(named)] and len(named) + counts["failed_not_named"] == len(want["failed"])
    assert out["since"] == since.strftime("%Y-%m-%dT%H:%M:%SZ") and out["next_skip"] is None
    summary = result.content[0].text
    assert summary.startswith(f"Counted 128 runs created since {out['since']} (UTC; ")
    assert "read 128 runs in 2 pages from skip 0, back to the time bound" in summary
    assert len(reads) == math.ceil(129 / 100)  # newest first, it stopped at the first run before the bound
    text = result.content[1].text
    for line in ("status: ", "source: ", "repository (runs, from pull requests' URLs): ", "failed, newest first: "):
        assert f"\n{line}" in text, line
    assert f"failed {len(want['failed'])}" in text and "no pull request" in text
    assert text_tokens(result) <= COUNTS_TOKENS


@pytest.mark.anyio
async def test_the_last_hours_are_listed_to_their_start_and_said_in_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    async with connected(_day()) as (client, sandbox):
        service = _service_runs(sandbox)
        asked = datetime.now(UTC)
        listed = (await client.call_tool("list_agent_runs", {"since": "3h", "limit": 100})).structured_content
        page = (await client.call_tool("list_agent_runs", {"since": "3 hours", "limit": 5})).structured_content
        monkeypatch.setattr(runs, "SCAN_PAGE_SIZE", 10)
        monkeypatch.setattr(run_scan, "MAX_SCANNED_RUNS", 20)
        bounded = (await client.call_tool("list_agent_runs", {"since": "12H", "counts": True})).structured_content
    bound = datetime.fromisoformat(listed["since"].replace("Z", "+00:00"))
    assert abs(bound - (asked - timedelta(hours=3))).total_seconds() < 5
    assert [run["id"] for run in listed["runs"]] == [run["id"] for run in service if _created(run) >= bound]
    assert len(listed["runs"]) == DAY * 3 // RECENT_HOURS and listed["next_skip"] is None
    assert listed["note"].endswith("back to the time bound")
    assert len(page["runs"]) == 5 and page["next_skip"] == 5 and "not back to the time bound" in page["note"]
    assert bounded["counts"]["runs"] == 20 and bounded["next_skip"] == 20
    assert "read 20 runs in 2 pages from skip 0, not back to the time bound: continue from next_skip" in bounded["note"]


@pytest.mark.anyio
async def test_a_time_without_an_offset_is_utc_and_said_so_and_a_bad_bound_is_refused_before_any_request() -> None:
    async with connected(_day()) as (client, sandbox):
        naive = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
        read_as_utc = await client.call_tool("list_agent_runs", {"since": naive, "counts": True})
        sandbox.request_log.clear()
        refused = {name: await client.call_tool("list_agent_runs", arguments) for name, arguments in {
            "future": {"since": (datetime.now(UTC) + timedelta(days=1)).isoformat()},
            "not a time": {"since": "yesterday"},
            "too far": {"since": "10000h"}, "no hours": {"since": "0h"}}.items()}
        sent = [r for r in sandbox.request_log if r.operation is not None]
    assert read_as_utc.structured_content["since"] == naive + "Z"
    assert f"{naive} had no UTC offset, so it was read as UTC" in read_as_utc.content[0].text
    for name, result in refused.items():
        assert result.is_error and result.structured_content["error"]["kind"] == "invalid_arguments", name
    assert "in the future" in refused["future"].structured_content["error"]["message"]
    assert "1 to 8784 hours" in refused["too far"].structured_content["error"]["message"]
    assert sent == []


@pytest.mark.anyio
async def test_counts_take_the_other_filters_and_name_the_failed_runs() -> None:
    async with connected(_day()) as (client, _):
        failed = (await client.call_tool("list_agent_runs", {"since": "24h", "counts": True, "statuses": ["failed"],
                                                             "source_type": "API"})).structured_content
        listed = (await client.call_tool("list_agent_runs", {"since": "24h", "statuses": ["failed"],
                                                             "source_type": "API", "limit": 100})).structured_content
    assert failed["counts"]["by_status"] == {"failed": len(listed["runs"])} and failed["counts"]["by_source"] == {
        "API": len(listed["runs"])}
    assert [run["id"] for run in failed["counts"]["failed"]] == [run["id"] for run in listed["runs"]][
        :len(failed["counts"]["failed"])]


def _run(index: int) -> AgentRun:
    """A run no real list would hold: a repository of its own with a long name, an unknown status and source."""
    owner, name = "o" * 39, f"{index:04d}" + "r" * 96
    return AgentRun.model_validate({
        "id": 100_000 - index, "status": "ERROR" if index % 2 else f"STATUS_{index}", "source_type": f"SOURCE_{index}",
        "created_at": "2025-06-21T11:20:04Z", "web_url": None,
        "github_pull_requests": [{"id": index, "url": f"https://github.com/{owner}/{name}/pull/{index}"}]})


def test_the_counts_stay_within_their_bound_for_any_runs() -> None:
    counter = RunCounter(RunFilter())
    counter.take([_run(index) for index in range(5000)])
    counts = counter.counts()
    page = RunList(runs=[], total=5000, next_skip=None, since="2025-06-21T00:00:00Z", counts=counts,
                   note="read 5000 runs in 50 pages from skip 0, to the oldest run").model_dump(mode="json")
    text = render_counts(page)
    assert counts.runs == 5000 and sum(counts.by_status.values()) == sum(counts.by_source.values()) == 5000
    assert len(counts.by_repository) + counts.other_repositories == 5000
    assert len(counts.failed) + counts.failed_not_named == 2500
    assert "others" in counts.by_status and "more repositories" in text and "more: statuses" in text
    assert len(text) // 4 <= COUNTS_TOKENS - 200  # the summary line has the rest
    assert len(RunList.model_validate(page).model_dump_json()) // 4 <= COUNTS_TOKENS
