"""Issue 46: every status the service gives a run, as the tools meet it from the sandbox: waits that end (or not),
a paused run, a run that has not moved for half an hour, the status words, and what the service sends beyond the spec.
"""

from __future__ import annotations

from typing import Any, Final

import anyio
import httpx2
import pytest
from sandboxed import connected

from agent_automation_mcp.api.statuses import STATUSES, ending_reason
from agent_automation_mcp.sandbox import SandboxConfig, ids
from catalogue import ENDS_WITH_REASON

ENDINGS: Final = (*ENDS_WITH_REASON, "ERROR", "FAILED", "CANCELLED", "COMPLETE")
LONG_RUNS: Final = SandboxConfig(run_seconds=600, quirks=True)  # a run ends when a test says so
WAIT_SECONDS: Final = 40  # more than any wait here needs: one that runs it out missed the run's end or pause


async def _fixture(url: str, **body: Any) -> dict[str, Any]:
    async with httpx2.AsyncClient(base_url=url) as control:
        answer = await control.post("/_sandbox/runs", json={"log_entries": 3, **body})
        answer.raise_for_status()
        return dict(answer.json())


@pytest.mark.anyio
async def test_every_ending_ends_a_wait_and_says_why_in_words() -> None:
    async with connected(LONG_RUNS) as (client, sandbox):
        runs = {ending: (await _fixture(sandbox.url, status="ACTIVE"))["id"] for ending in ENDINGS}
        results: dict[str, Any] = {}

        async def wait(ending: str) -> None:
            results[ending] = await client.call_tool("get_agent_run", {"agent_run_id": runs[ending],
                                                                       "wait_seconds": WAIT_SECONDS})

        async with anyio.create_task_group() as group, httpx2.AsyncClient(base_url=sandbox.url) as control:
            for ending in ENDINGS:
                group.start_soon(wait, ending)
            await anyio.sleep(1.0)
            for ending, run_id in runs.items():
                (await control.post(f"/_sandbox/runs/{run_id}/end", json={"status": ending})).raise_for_status()
    for ending, result in results.items():
        out, text = result.structured_content, result.content[0].text
        assert out["status"] == ending and out["is_terminal"] is True and "call again" not in text, ending
        assert out["waited_seconds"] < WAIT_SECONDS, (ending, out["waited_seconds"])  # ended by its end, not run out
        assert out["reason"] == ending_reason(ending) and "last_step_at" not in {k for k, v in out.items() if v}
        if out["reason"]:
            assert f"failed: {out['reason']}" in text, text


@pytest.mark.anyio
async def test_a_wait_on_a_paused_run_ends_at_once_and_says_it_waits_for_a_resume() -> None:
    polls: list[float] = []

    async def on_poll(progress: float, total: float | None, message: str | None) -> None:
        polls.append(progress)  # a wait reports before each poll it sleeps for

    async with connected(LONG_RUNS, toolsets=("runs",)) as (client, _):
        result = await client.call_tool("get_agent_run", {"agent_run_id": ids.PAUSED_RUN_ID,
                                                          "wait_seconds": WAIT_SECONDS}, progress_callback=on_poll)
    out, text = result.structured_content, result.content[0].text
    assert out["status"] == "PAUSED" and out["is_terminal"] is False and polls == []  # not one poll: ended at once
    assert out["waited_seconds"] < WAIT_SECONDS
    assert out["reason"] == "paused: it moves again only when resumed" and "call again" not in text
    assert "paused: it moves again only when resumed" in text and text.endswith("; resume it with resume_agent_run")


@pytest.mark.anyio
async def test_a_paused_run_names_no_resume_where_the_connection_cannot_resume() -> None:
    async with connected(LONG_RUNS, toolsets=("runs",), read_only=True) as (client, _):
        result = await client.call_tool("get_agent_run", {"agent_run_id": ids.PAUSED_RUN_ID})
    assert "only when resumed" in result.content[0].text and "resume_agent_run" not in result.content[0].text


@pytest.mark.anyio
async def test_a_live_run_says_when_it_last_did_something() -> None:
    async with connected(LONG_RUNS) as (client, sandbox):
        stale = await _fixture(sandbox.url, status="ACTIVE", idle_seconds=1800, goes_on=False)
        result = await client.call_tool("get_agent_run", {"agent_run_id": stale["id"]})
        finished = await client.call_tool("get_agent_run", {"agent_run_id": ids.RUN_WITH_PR_ID})
        logs_reads = [r for r in sandbox.request_log if r.operation == "get_agent_run_logs"]
    out, text = result.structured_content, result.content[0].text
    assert out["is_terminal"] is False and 1790 <= out["last_step_seconds"] <= 1900
    assert out["last_step_at"].endswith("+00:00") and "last step 30 min" in text and " UTC)" in text
    assert finished.structured_content["last_step_at"] is None and len(logs_reads) == 1  # finished: nothing read


@pytest.mark.anyio
async def test_the_words_people_use_find_every_status_of_the_table() -> None:
    async with connected(LONG_RUNS) as (client, sandbox):
        evaluating = (await _fixture(sandbox.url, status="EVALUATION", goes_on=False))["id"]

        async def found(*words: str) -> set[int]:
            result = await client.call_tool("list_agent_runs", {"statuses": list(words), "limit": 100})
            return {run["id"] for run in result.structured_content["runs"]}

        paused, failed = await found("paused"), await found("failed")
        finished, running = await found("finished"), await found("running")
        unfinished, timeouts = await found("unfinished"), await found("timed out")
    limits = {ids.TIMEOUT_RUN_ID, ids.MAX_ITERATIONS_RUN_ID, ids.OUT_OF_TOKENS_RUN_ID}
    assert paused == {ids.PAUSED_RUN_ID} and failed == limits | {ids.ERROR_RUN_ID} and timeouts == {ids.TIMEOUT_RUN_ID}
    assert limits | {ids.STOPPED_RUN_ID, ids.RUN_WITH_PR_ID} <= finished and not finished & unfinished
    assert {evaluating, ids.STUCK_RUN_ID} <= running and ids.PAUSED_RUN_ID not in running
    assert unfinished == {evaluating, ids.STUCK_RUN_ID, ids.PAUSED_RUN_ID}
    assert {status.value for status in STATUSES if status.kind.finished} >= {"TIMEOUT", "OUT_OF_TOKENS"}


@pytest.mark.anyio
async def test_what_the_service_sends_beyond_the_spec_reaches_the_result_bounded() -> None:
    beyond = {"parent_run_id": 401, "cost_cents": 12, "note_from_service": "x" * 5_000, "\u202epath": "a\u200bb"}
    async with connected(LONG_RUNS) as (client, sandbox):
        run = await _fixture(sandbox.url, status="COMPLETE", beyond_spec=beyond)
        read = await client.call_tool("get_agent_run", {"agent_run_id": run["id"]})
        listed = await client.call_tool("list_agent_runs", {"limit": 1})
        merged = await client.call_tool("get_agent_run", {"agent_run_id": ids.MERGED_RUN_ID})
        draft = await client.call_tool("get_agent_run", {"agent_run_id": ids.DRAFT_RUN_ID})
    extra = read.structured_content["extra_fields"]
    assert extra["parent_run_id"] == 401 and extra["cost_cents"] == 12 and extra["path"] == "ab"  # made visible
    assert len(extra["note_from_service"]) < 400 and "trimmed" in extra["note_from_service"]
    assert listed.structured_content["runs"][0]["extra_fields"] == extra
    (pr,) = merged.structured_content["pull_requests"]
    assert (pr["state"], pr["merged"]) == ("closed", True) and ", closed, merged)" in merged.content[0].text
    assert draft.structured_content["pull_requests"][0]["state"] == "draft" and "draft" in draft.content[0].text
