"""The tasks extension in process, both eras: the SDK's in-memory client against the server, the sandbox on loopback.

Handles, get, result, list, cancel and ids that are not the caller's, each in under a few seconds; the fleet tests
(tests/e2e/test_tasks.py) stay for what only a fleet shows: any replica answering, reads shared through Redis.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from types import MappingProxyType
from typing import Any, Final

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client import ClientExtension
from mcp.types import INVALID_PARAMS, METHOD_NOT_FOUND

from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.api.statuses import ending_reason
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.sandbox.config import DEMO_TOKEN
from agent_automation_mcp.sandbox.ids import RUN_WITHOUT_PR_ID
from agent_automation_mcp.server import build_server
from agent_automation_mcp.tools.checks import CLOSEST_TO_CANCEL
from agent_automation_mcp.tools.registry import TOOLSETS
from catalogue import ENDS_WITH_REASON
from task_requester import (
    TASKS,
    CancelTask,
    ListTasks,
    TaskPoller,
    TaskResult,
    TaskState,
    call_as_task,
    get_task,
    request,
)

OTHER_TOKEN: Final = "another-tenant-in-process"
KEYS: Final = ("a-key-every-server-here-shares-0123456789",)  # so an id fails by its token, not by its server
RUN_SECONDS: Final = 1.0  # from create or resume to the end of a sandbox run
ENDED: Final = RUN_SECONDS + 0.2  # a first read this long after the start finds the run ended
MODERN: Final = "auto"  # in process, the client adopts 2026-07-28 without a handshake
LEGACY: Final = "legacy"  # 2025-11-25, through the initialize handshake


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    config = SandboxConfig(run_seconds=RUN_SECONDS, seed=11, visible_orgs=2, run_error_fraction=0.0,
                           tokens=(DEMO_TOKEN, OTHER_TOKEN))
    with SandboxServer(config) as server:
        yield server


@asynccontextmanager
async def connected(sandbox: SandboxServer, mode: str, *, token: str = DEMO_TOKEN, org_id: int | None = None,
                    extensions: list[ClientExtension] | None = None,
                    stoppers: Mapping[str, str] | None = None) -> AsyncIterator[Client]:
    """A client of a server on the sandbox; `stoppers`, the tools its tasks' cancel may stop a run with (by default
    the ones the declarations make: none while no operation stops a run)."""
    api = ApiSettings(token=token, org_id=org_id or sandbox.org_id, base_url=sandbox.url)
    server = build_server(api, ServerSettings(toolsets=TOOLSETS), state_keys=KEYS)
    if stoppers is not None:
        server.tasks.stoppers = MappingProxyType(dict(stoppers))
    async with Client(server, mode=mode, extensions=extensions) as client:
        yield client


def run_of(state: TaskState | dict[str, Any]) -> int:
    message = state.status_message if isinstance(state, TaskState) else state["statusMessage"]
    found = re.search(r"following run (\d+)", message or "")
    assert found, state
    return int(found[1])


def same_run(result: dict[str, Any], answer: Any) -> None:
    """A task's result is get_agent_run's answer for its run (apart from how long that call waited)."""
    assert {k: v for k, v in result["structuredContent"].items() if k != "waited_seconds"} == {
        k: v for k, v in answer.structured_content.items() if k != "waited_seconds"}
    assert result["content"][0]["text"] == answer.content[0].text


@pytest.mark.anyio
async def test_2026_a_run_starting_call_answers_a_task_that_get_follows_to_the_run_result(
        sandbox: SandboxServer) -> None:
    poller = TaskPoller(follow=False)
    async with connected(sandbox, MODERN, extensions=[poller]) as client:
        advertised = client.server_capabilities.extensions or {}
        listed = await client.call_tool("list_agent_runs", {})  # not a run-starting tool: its answer, as ever
        await client.call_tool("create_agent_run", {"prompt": "Follow me as a task"})
        handle = poller.handles[-1]
        await anyio.sleep(ENDED)
        ended = await get_task(client, handle.task_id)
        direct = await client.call_tool("get_agent_run", {"agent_run_id": run_of(handle)})
        for method in (TaskResult, ListTasks):  # 2025-11-25's methods only
            with pytest.raises(MCPError) as absent:
                await request(client, method, handle.task_id if method is TaskResult else None)
            assert absent.value.error.code == METHOD_NOT_FOUND
    async with connected(sandbox, MODERN) as undeclared:  # no extension declared: the run, as before
        plain = await undeclared.call_tool("create_agent_run", {"prompt": "No task for me"})
    assert TASKS in advertised and len(poller.handles) == 1 and not listed.is_error
    assert handle.status == "working" and handle.task_id.startswith("run-task.") and handle.last_updated_at
    assert {"ttlMs", "pollIntervalMs"} <= set(handle.model_extra or {})
    assert "create_agent_run started a task following run" in (handle.status_message or "")
    assert ended.status == "completed" and "ended COMPLETE" in (ended.status_message or "")
    same_run(ended.model_extra["result"], direct)
    assert "id" in plain.structured_content and not plain.is_error


@pytest.mark.anyio
async def test_2026_the_sdk_client_follows_a_task_to_its_end_by_itself(sandbox: SandboxServer) -> None:
    poller = TaskPoller(poll_seconds=ENDED)  # its first poll finds the run ended
    async with connected(sandbox, MODERN, extensions=[poller]) as client:
        result = await client.call_tool("resume_agent_run", {"agent_run_id": (await client.call_tool(
            "create_agent_run", {"prompt": "first"})).structured_content["id"], "prompt": "and then"})
    assert len(poller.handles) == 2 and result.structured_content["is_terminal"] is True and not result.is_error


@pytest.mark.anyio
async def test_2026_cancel_is_acknowledged_and_every_later_answer_says_the_run_goes_on(
        sandbox: SandboxServer) -> None:
    poller = TaskPoller(follow=False)
    async with connected(sandbox, MODERN, extensions=[poller], stoppers={}) as client:  # no tool stops a run here
        await client.call_tool("create_agent_run", {"prompt": "cancel me"})
        task_id = poller.handles[-1].task_id
        ack = await request(client, CancelTask, task_id)
        working = await get_task(client, task_id)  # read at once: the run is working
    assert ack.model_extra == {"resultType": "complete"}
    message = working.status_message or ""
    assert working.status == "working" and "goes on" in message
    if CLOSEST_TO_CANCEL is not None:  # while no operation stops a run
        assert "cannot cancel an agent run: run" in message
        assert f"{CLOSEST_TO_CANCEL} comes closest, only on the user's explicit request" in message
    else:
        assert "no tool that stops an agent run is offered: run" in message


@pytest.mark.anyio
@pytest.mark.parametrize("mode", [MODERN, LEGACY])
async def test_cancel_stops_the_run_with_a_tool_that_stops_one_where_the_request_is_offered_it(mode: str) -> None:
    """With a tool that stops a run (`RunEffect.STOPS`; none today, so `ban_checks` stands in: the sandbox stops a run
    without a pull request when it is banned), a cancel sends it for the task's run and the task reads `cancelled`
    from the service's next answer: the reading from before the stop is not taken for the run's state. A sandbox of
    its own: the module's rate limits are the other tests'."""
    poller = TaskPoller(follow=False)
    with SandboxServer(SandboxConfig(run_seconds=RUN_SECONDS, seed=11, run_error_fraction=0.0)) as sandbox:
        api = ApiSettings(token=DEMO_TOKEN, org_id=sandbox.org_id, base_url=sandbox.url)
        server = build_server(api, ServerSettings(toolsets=TOOLSETS), state_keys=KEYS)
        server.tasks.stoppers = MappingProxyType({"ban_checks": "ban_checks"})
        async with Client(server, mode=mode, extensions=[poller] if mode == MODERN else None) as client:
            answer, after, stops = await _cancelled_with_a_stop(client, sandbox, poller, mode)
    assert len(stops) == 1 and after.status == "cancelled", after
    assert f"Cancel was asked: ban_checks asked the service to stop run {RUN_WITHOUT_PR_ID}." in (
        after.status_message or "")
    assert "cannot cancel" not in (after.status_message or "")
    if mode == LEGACY:  # the task as it stands once stopped
        assert answer.model_extra["status"] == "cancelled"


async def _cancelled_with_a_stop(client: Client, sandbox: SandboxServer, poller: TaskPoller,
                                 mode: str) -> tuple[Any, TaskState, list[Any]]:
    """A task resuming a run without a pull request, read once, then cancelled: the cancel's answer, the task read
    after it, and the stops the sandbox received."""
    resume = {"agent_run_id": RUN_WITHOUT_PR_ID, "prompt": "stop me"}
    if mode == MODERN:
        await client.call_tool("resume_agent_run", resume)
        task_id = poller.handles[-1].task_id
    else:
        task_id = (await call_as_task(client, "resume_agent_run", resume))["task"]["taskId"]
    assert (await get_task(client, task_id)).status == "working"  # read before the stop, and shared
    sent = len(sandbox.request_log)
    answer = await request(client, CancelTask, task_id)
    stops = [entry for entry in sandbox.request_log[sent:] if entry.path.endswith("/agent/run/ban")]
    return answer, await get_task(client, task_id), stops


@pytest.mark.anyio
async def test_2025_tasks_from_call_to_result_list_cancel_and_expiry(sandbox: SandboxServer) -> None:
    async with connected(sandbox, LEGACY, stoppers={}) as client:  # a cancel stops nothing here
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        short = (await call_as_task(client, "create_agent_run", {"prompt": "short-lived"}, ttl_ms=1000))["task"]
        first = (await client.call_tool("create_agent_run", {"prompt": "first"})).structured_content["id"]
        task = (await call_as_task(client, "resume_agent_run", {"agent_run_id": first, "prompt": "and then"}))["task"]
        await anyio.sleep(ENDED)  # the run has ended: the first status read (tasks/list's) says so
        listed = await request(client, ListTasks)
        result = await request(client, TaskResult, task["taskId"])
        state = await get_task(client, task["taskId"])
        direct = await client.call_tool("get_agent_run", {"agent_run_id": run_of(task)})
        with pytest.raises(MCPError) as ended:
            await request(client, CancelTask, task["taskId"])
        working = (await call_as_task(client, "create_agent_run", {"prompt": "cancel me"}))["task"]["taskId"]
        cancelled = await request(client, CancelTask, working)
        with pytest.raises(MCPError) as not_a_task:
            await call_as_task(client, "list_agent_runs", {})
        with pytest.raises(MCPError) as expired:  # its 1 s are over
            await get_task(client, short["taskId"])
    async with connected(sandbox, LEGACY, token=OTHER_TOKEN) as other:
        theirs = await request(other, ListTasks)
    assert tools["create_agent_run"].execution.task_support == "optional"
    assert tools["get_agent_run"].execution is None
    assert task["status"] == "working" and {"ttl", "pollInterval"} <= set(task) and short["ttl"] == 1000
    assert [entry["taskId"] for entry in listed.model_extra["tasks"]] == [task["taskId"]]  # the short one expired
    assert listed.model_extra["tasks"][0]["status"] == "completed" and "nextCursor" not in listed.model_extra
    assert theirs.model_extra["tasks"] == []
    same_run(result.model_extra, direct)
    assert result.meta["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
    assert state.status == "completed" and "tasks/result has its result" in (state.status_message or "")
    assert ended.value.error.code == INVALID_PARAMS
    assert ended.value.error.message == "Task already completed: nothing to cancel"
    assert cancelled.model_extra["status"] == "working" and "Cancel was asked" in cancelled.model_extra["statusMessage"]
    assert not_a_task.value.error.code == METHOD_NOT_FOUND
    assert "call it without `task`" in not_a_task.value.error.message
    assert "expired" in expired.value.error.message and "get_agent_run" in expired.value.error.data["hint"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", [MODERN, LEGACY])
async def test_ids_not_the_callers_are_not_found_and_cost_no_request(sandbox: SandboxServer, mode: str) -> None:
    """Another token's, another organisation's, altered, cut short, made up or too long: each refused alike, before
    any request to the service."""
    async with connected(sandbox, mode) as client:
        if mode == LEGACY:
            task_id = (await call_as_task(client, "create_agent_run", {"prompt": "mine"}))["task"]["taskId"]
        else:
            poller = TaskPoller(follow=False)
            async with connected(sandbox, mode, extensions=[poller]) as declared:
                await declared.call_tool("create_agent_run", {"prompt": "mine"})
            task_id = poller.handles[-1].task_id
        body = task_id.removeprefix("run-task.")
        altered = "run-task." + body[:20] + ("A" if body[20] != "A" else "B") + body[21:]
        sent = [r for r in sandbox.request_log if r.operation == "get_agent_run"]
        refused: list[MCPError] = []
        other_org = next(org for org in sandbox.state.config.visible_org_ids if org != sandbox.org_id)
        for token, org_id in ((OTHER_TOKEN, None), (DEMO_TOKEN, other_org)):
            async with connected(sandbox, mode, token=token, org_id=org_id) as stranger:
                with pytest.raises(MCPError) as foreign:
                    await get_task(stranger, task_id)
                refused.append(foreign.value)
        for bad in (altered, task_id[:-2], "run-task.x", "a" * 5000):
            with pytest.raises(MCPError) as wrong:
                await get_task(client, bad)
            refused.append(wrong.value)
        unsent = [r for r in sandbox.request_log if r.operation == "get_agent_run"] == sent
        own = await get_task(client, task_id)
    assert [error.error.code for error in refused] == [INVALID_PARAMS] * 6
    assert [error.error.message for error in refused[:5]] == ["Task not found"] * 5  # the last: too long for an id
    assert all("taskId" in error.error.data["hint"] for error in refused[:5])
    assert unsent and own.task_id == task_id  # its own caller reads it


async def _task_of(client: Client, mode: str, poller: TaskPoller, tool: str, arguments: dict[str, Any]) -> str:
    """A task for the run `tool` starts, asked the way `mode`'s era asks."""
    if mode == LEGACY:
        return str((await call_as_task(client, tool, arguments))["task"]["taskId"])
    await client.call_tool(tool, arguments)
    return poller.handles[-1].task_id


def _active_run(sandbox: SandboxServer) -> int:
    return int(httpx2.post(f"{sandbox.url}/_sandbox/runs", json={"status": "ACTIVE"}).json()["id"])


def _end(sandbox: SandboxServer, run_id: int, status: str) -> None:
    httpx2.post(f"{sandbox.url}/_sandbox/runs/{run_id}/end", json={"status": status}).raise_for_status()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", [MODERN, LEGACY])
@pytest.mark.parametrize("ending", ENDS_WITH_REASON)
async def test_a_run_that_ends_out_of_a_limit_ends_its_task_as_an_error_that_says_why(
        sandbox: SandboxServer, mode: str, ending: str) -> None:
    poller = TaskPoller(follow=False)
    async with connected(sandbox, mode, extensions=[poller]) as client:
        run = _active_run(sandbox)
        task_id = await _task_of(client, mode, poller, "resume_agent_run", {"agent_run_id": run, "prompt": "go on"})
        _end(sandbox, run, ending)
        state = await get_task(client, task_id)
        result = (await request(client, TaskResult, task_id)).model_extra if mode == LEGACY else \
            (state.model_extra or {})["result"]
    assert state.status == "completed" and f"ended {ending} ({ending_reason(ending)})" in (state.status_message or "")
    assert result["isError"] is True and result["structuredContent"]["reason"] == ending_reason(ending)
    assert f"failed: {ending_reason(ending)}" in result["content"][0]["text"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", [MODERN, LEGACY])
async def test_a_paused_run_keeps_its_task_working_saying_so_and_a_resume_is_followed_to_the_end(
        sandbox: SandboxServer, mode: str) -> None:
    poller = TaskPoller(follow=False)
    async with connected(sandbox, mode, extensions=[poller]) as client:
        run = _active_run(sandbox)
        task_id = await _task_of(client, mode, poller, "resume_agent_run", {"agent_run_id": run, "prompt": "Go"})
        _end(sandbox, run, "PAUSED")
        paused = await get_task(client, task_id)
        await client.call_tool("resume_agent_run", {"agent_run_id": run, "prompt": "Go on"})
        resumed = await get_task(client, task_id)
        ended = resumed
        for _ in range(30):  # read again each poll interval (5 s) by whoever follows: within a few
            if ended.status != "working":
                break
            await anyio.sleep(0.5)
            ended = await get_task(client, task_id)
    assert paused.status == "working" and f"Run {run} is PAUSED" in (paused.status_message or "")
    assert "only when resumed; resume it with resume_agent_run." in (paused.status_message or "")
    assert resumed.status == "working" and "is ACTIVE" in (resumed.status_message or "")
    assert ended.status == "completed" and "ended COMPLETE" in (ended.status_message or "")
