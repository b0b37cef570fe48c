"""The shared run-status reader without Redis (stdio, one replica): one read of the newest runs serves every poll of
an interval, whichever runs it is for."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx2
import pytest

from agent_automation_mcp import run_status
from agent_automation_mcp.api import AgentAutomationClient, ApiTransport, Credentials
from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.caching import SharedStore
from agent_automation_mcp.run_status import Reading, RunStatus, now_ms
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer, ids
from agent_automation_mcp.tasks.listing import MAX_TASKS, PAGE_TASKS, TaskIndex
from agent_automation_mcp.tools.errors import error_result


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    config = SandboxConfig(run_seconds=600, seed=2, rate_limits=parse_rate_limits("agent_creation=100/60s"))
    with SandboxServer(config) as server:
        yield server


@pytest.fixture
async def client(sandbox: SandboxServer) -> AsyncIterator[AgentAutomationClient]:
    settings = ApiSettings(token=sandbox.token, org_id=sandbox.org_id, base_url=sandbox.url, timeout=5.0)
    async with ApiTransport(settings) as transport:
        yield AgentAutomationClient(transport, Credentials(sandbox.token, sandbox.org_id)).within(30)


def _sent_since(sandbox: SandboxServer, before: int) -> list[str]:
    return [str(record.operation) for record in list(sandbox.request_log)[before:]]


@pytest.fixture
def short_interval(monkeypatch: pytest.MonkeyPatch) -> float:
    """A poll interval of 0.3 s, so that a test sees several."""
    monkeypatch.setattr(run_status, "POLL_SECONDS", 0.3)
    monkeypatch.setattr(run_status, "POLL_MS", 300)
    return 0.3


@pytest.mark.anyio
async def test_fifty_polls_of_ten_runs_cost_one_read_of_the_newest_runs(sandbox: SandboxServer,
                                                                        client: AgentAutomationClient) -> None:
    published: list[tuple[int, int, dict[str, Any]]] = []

    async def heard(org: int, run: int, reading: dict[str, Any]) -> None:
        published.append((org, run, reading))

    runs = [(await client.create_agent_run(f"Read me once, {n}")).id for n in range(10)]
    status = RunStatus(SharedStore(), error_result, heard)
    before = len(sandbox.request_log)
    readings: dict[int, list[Reading]] = {run: [] for run in runs}
    async with anyio.create_task_group() as group:
        for poll in range(50):
            async def read(run_id: int = runs[poll % 10]) -> None:
                readings[run_id].append(await status.read(client, sandbox.org_id, run_id))
            group.start_soon(read)
    assert _sent_since(sandbox, before) == ["list_agent_runs"]
    assert all(len(seen) == 5 and {r.run.id for r in seen if r.run} == {run} for run, seen in readings.items())
    assert {r.run.status for seen in readings.values() for r in seen if r.run} == {"ACTIVE"}
    assert all(r.poll_ms == 5000 and r.problem is None for seen in readings.values() for r in seen)
    assert published == []  # a first page tells of no change


@pytest.mark.anyio
async def test_a_status_a_page_shows_changed_is_published_once(sandbox: SandboxServer, client: AgentAutomationClient,
                                                               short_interval: float) -> None:
    published: list[tuple[int, int, str]] = []

    async def heard(org: int, run: int, reading: dict[str, Any]) -> None:
        published.append((org, run, reading["run"]["status"]))

    watched, other = (await client.create_agent_run("Watch me")).id, (await client.create_agent_run("Not me")).id
    status = RunStatus(SharedStore(), error_result, heard)
    await status.read(client, sandbox.org_id, watched)
    httpx2.post(f"{sandbox.url}/_sandbox/runs/{watched}/end", json={"status": "OUT_OF_TOKENS"})
    for _ in range(3):
        await anyio.sleep(short_interval * 1.2)
        last = await status.read(client, sandbox.org_id, other)
    assert published == [(sandbox.org_id, watched, "OUT_OF_TOKENS")] and last.run and last.run.status == "ACTIVE"


@pytest.mark.anyio
async def test_a_run_older_than_the_page_is_read_on_its_own_and_not_looked_for_there_again(
        sandbox: SandboxServer, client: AgentAutomationClient, short_interval: float,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_status, "PAGE_RUNS", 3)  # the page: the three newest runs; 401 is far older
    status = RunStatus(SharedStore(), error_result)
    before = len(sandbox.request_log)
    first = await status.read(client, sandbox.org_id, ids.RUN_WITH_PR_ID)
    await anyio.sleep(short_interval * 1.2)
    again = await status.read(client, sandbox.org_id, ids.RUN_WITH_PR_ID)
    assert _sent_since(sandbox, before) == ["list_agent_runs", "get_agent_run", "get_agent_run"]
    assert first.run and again.run and first.run.status == again.run.status == "COMPLETE"


@pytest.mark.anyio
async def test_a_start_is_never_overtaken_by_a_page_read_before_it(sandbox: SandboxServer,
                                                                   client: AgentAutomationClient) -> None:
    status = RunStatus(SharedStore(), error_result)
    await status.read(client, sandbox.org_id, ids.RUN_WITH_PR_ID)  # a page, 401 COMPLETE in it, for 5 s
    sent = run_status.now_ms()
    resumed = await client.resume_agent_run(ids.RUN_WITH_PR_ID, "Once more")
    await status.remember(client, sandbox.org_id, resumed, sent)
    after = await status.read(client, sandbox.org_id, ids.RUN_WITH_PR_ID)
    assert resumed.status == "ACTIVE" and after.run and after.run.status == "ACTIVE" and after.read_ms >= sent


@pytest.mark.anyio
async def test_a_tokens_task_list_is_its_own_newest_first_and_bounded() -> None:
    index, now = TaskIndex(SharedStore()), now_ms()
    await index.add("token-a", "a-day-old", now - 24 * 3600 * 1000 - 1)
    for number in range(MAX_TASKS + 5):
        await index.add("token-a", f"task-{number}", now + number)
    await index.add("token-b", "task-of-b", now)
    first, more = await index.page("token-a", 0)
    pages = [first]
    while more:
        page, more = await index.page("token-a", sum(map(len, pages)))
        pages.append(page)
    listed = [task for page in pages for task in page]
    assert first[:2] == [f"task-{MAX_TASKS + 4}", f"task-{MAX_TASKS + 3}"] and len(first) == PAGE_TASKS
    assert len(listed) == MAX_TASKS and "task-of-b" not in listed and "task-4" not in listed
    assert "a-day-old" not in listed


@pytest.mark.anyio
async def test_errors_are_shared_like_a_status_and_a_gone_run_ends_the_task(sandbox: SandboxServer,
                                                                          client: AgentAutomationClient) -> None:
    run = await client.create_agent_run("Fail to read me")
    status = RunStatus(SharedStore(), error_result)
    before = len(sandbox.request_log)
    sandbox.faults.error_rate, sandbox.faults.operations = 1.0, frozenset({"get_agent_run", "list_agent_runs"})
    try:
        failing = [await status.read(client, sandbox.org_id, run.id) for _ in range(20)]
    finally:
        sandbox.faults.error_rate, sandbox.faults.operations = 0.0, None
    sent = _sent_since(sandbox, before)  # one read of each kind, with the transport's own retries of a safe GET
    gone = [await status.read(client, sandbox.org_id, 987_654) for _ in range(5)]
    assert [(r.run, r.problem, r.ended) for r in failing] == [(None, "server_error", None)] * 20
    assert 1 <= sent.count("list_agent_runs") <= 3 and 1 <= sent.count("get_agent_run") <= 3
    assert all(r.ended is not None and r.ended.is_error for r in gone)
    assert gone[0].ended.structured_content["error"]["kind"] == "not_found"
    assert len([r for r in sandbox.request_log if r.path.endswith("/987654")]) == 1
