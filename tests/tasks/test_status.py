"""The shared run-status read without Redis (stdio, one replica): one request serves every poll of an interval."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from agent_automation_mcp.api import AgentAutomationClient, ApiTransport, Credentials
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.caching import SharedStore
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.tasks.ids import now_ms
from agent_automation_mcp.tasks.listing import MAX_TASKS, PAGE_TASKS, TaskIndex
from agent_automation_mcp.tasks.status import RunStatus


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(run_seconds=600, seed=2)) as server:
        yield server


@pytest.mark.anyio
async def test_fifty_concurrent_polls_cost_one_request_and_every_read_is_published(sandbox: SandboxServer) -> None:
    published: list[tuple[int, int, dict[str, Any]]] = []

    async def heard(org: int, run: int, reading: dict[str, Any]) -> None:
        published.append((org, run, reading))

    settings = ApiSettings(token=sandbox.token, org_id=sandbox.org_id, base_url=sandbox.url, timeout=5.0)
    async with ApiTransport(settings) as transport:
        client = AgentAutomationClient(transport, Credentials(sandbox.token, sandbox.org_id)).within(20)
        run = await client.create_agent_run("Read me once")
        status = RunStatus(SharedStore(), heard)
        readings = []
        async with anyio.create_task_group() as group:
            for _ in range(50):
                async def poll() -> None:
                    readings.append(await status.read(client, sandbox.org_id, run.id))
                group.start_soon(poll)
    reads = [r for r in sandbox.request_log if r.operation == "get_agent_run"]
    assert len(reads) == 1 and len(published) == 1 and published[0][:2] == (sandbox.org_id, run.id)
    assert {reading.run.status for reading in readings if reading.run} == {"ACTIVE"} and len(readings) == 50
    assert all(reading.poll_ms == 5000 and reading.problem is None for reading in readings)


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
async def test_errors_are_shared_like_a_status_and_a_gone_run_ends_the_task(sandbox: SandboxServer) -> None:
    settings = ApiSettings(token=sandbox.token, org_id=sandbox.org_id, base_url=sandbox.url, timeout=5.0)
    async with ApiTransport(settings) as transport:
        client = AgentAutomationClient(transport, Credentials(sandbox.token, sandbox.org_id)).within(20)
        run = await client.create_agent_run("Fail to read me")
        status = RunStatus(SharedStore())
        sent = len(sandbox.request_log)
        sandbox.faults.error_rate, sandbox.faults.operations = 1.0, frozenset({"get_agent_run"})
        try:
            failing = [await status.read(client, sandbox.org_id, run.id) for _ in range(20)]
        finally:
            sandbox.faults.error_rate, sandbox.faults.operations = 0.0, None
        attempts = len(sandbox.request_log) - sent  # one read, with the transport's own retries of a safe GET
        gone = [await status.read(client, sandbox.org_id, 987_654) for _ in range(5)]
    assert {(r.run, r.problem, r.ended) for r in failing} == {(None, "server_error", None)} and attempts <= 3
    assert all(r.ended is not None and r.ended.is_error for r in gone)
    assert gone[0].ended.structured_content["error"]["kind"] == "not_found"
    assert len([r for r in sandbox.request_log if r.path.endswith("/987654")]) == 1
