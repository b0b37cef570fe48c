"""Agent runs followed as MCP tasks, end to end: the SDK's client as task requester, both protocol eras, over stdio
and through HAProxy round robin to 3 replicas on one Redis (one fleet for every test here)."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import test_rollouts
from harness import RATE_LIMITS, HttpServer, sandbox_env, stdio_server
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families
from test_rollouts import Fleet

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.redis_pool import REDIS_CONNECTIONS, REDIS_TIMEOUT
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.sandbox.config import DEMO_TOKEN
from agent_automation_mcp.tasks.notify import MAX_TENANT_STREAMS
from agent_automation_mcp.tools.checks import CLOSEST_TO_CANCEL
from catalogue import REPO_ID
from schedstat import waited_since, waiting_for_cpu_in
from task_requester import (
    TASKS,
    CancelTask,
    ListTasks,
    TaskPoller,
    TaskResult,
    TaskState,
    call_as_task,
    get_task,
    listen,
    request,
)

OTHER_TOKEN = "another-tenant-token"
LISTENERS = tuple(f"listening-tenant-{i}" for i in range(3))
TS_CLIENT = Path(__file__).parent / "ts_client"
MAX_POLLS = 60
ATTEMPTS = 3  # tasks tried until one's run is still working when the listen stream first reads it
MOST_ATTEMPTS = 10  # and those a busy machine held up (see Listened.starved) do not count, up to this many in all
RUN_SECONDS = 1.5  # from create or resume to the end of a sandbox run


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    config = SandboxConfig(run_seconds=RUN_SECONDS, seed=5, visible_orgs=2, run_error_fraction=0.5,
                           tokens=(DEMO_TOKEN, OTHER_TOKEN, *LISTENERS),
                           rate_limits=parse_rate_limits(RATE_LIMITS))
    with SandboxServer(config) as server:
        yield server


fleet = test_rollouts.fleet  # the shipped HAProxy before 3 replicas on one Redis, on this module's sandbox


def http_client(url: str, sandbox: SandboxServer, token: str = DEMO_TOKEN, org_id: int | None = None,
                read_only: bool = False, **options: Any) -> Client:
    organisation = str(org_id if org_id is not None else sandbox.org_id)
    headers = {"authorization": f"Bearer {token}", "x-organization-id": organisation}
    http = httpx2.AsyncClient(headers=headers | ({"x-mcp-readonly": "true"} if read_only else {}),
                              timeout=httpx2.Timeout(30, read=90))
    return Client(streamable_http_client(url, http_client=http), **options)


def run_of(handle: TaskState) -> int:
    found = re.search(r"following run (\d+)", handle.status_message or "")
    assert found, handle
    return int(found[1])


def upstream_reads(replica: HttpServer) -> float:
    """Requests this replica sent to the service so far (its metrics), all of them status reads in these tests."""
    text = httpx2.get(f"{replica.origin}/metrics", timeout=10).text
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == "agent_automation_upstream_requests_total" and sample.labels["bucket"] == "standard")


def reads_of(sandbox: SandboxServer, run_id: int) -> int:
    """The service's reads that can tell the run's status: of the run itself, or of the newest runs (its page)."""
    return sum(1 for r in sandbox.request_log if r.method == "GET" and (
        r.path.endswith(f"/agent/run/{run_id}") or r.operation == "list_agent_runs"))


async def started(client: Client, poller: TaskPoller, tool: str = "create_agent_run",
                  arguments: dict[str, Any] | None = None) -> str:
    await client.call_tool(tool, arguments or {"prompt": "Follow me as a task"})
    return poller.handles[-1].task_id


async def finished(client: Client, task_id: str) -> Any:
    for _ in range(MAX_POLLS):
        state = await get_task(client, task_id)
        if state.status != "working":
            return state
        await anyio.sleep(0.25)
    raise AssertionError(f"task {task_id} did not finish")


@pytest.mark.anyio
async def test_tasks_are_followed_on_every_replica_to_the_run_result(fleet: Fleet, sandbox: SandboxServer) -> None:
    poller = TaskPoller(follow=False)
    async with http_client(fleet.url, sandbox) as client:  # no extension: the run, as before
        plain = await client.call_tool("create_agent_run", {"prompt": "No task for me"})
        advertised = client.server_capabilities.extensions or {}
    async with http_client(fleet.url, sandbox, extensions=[poller]) as client:
        task_ids = [await started(client, poller) for _ in range(6)]  # half the sandbox's runs end in ERROR (seeded)
    assert "id" in plain.structured_content and len(poller.handles) == 6 and TASKS in advertised
    handle = poller.handles[0]
    assert handle.status == "working" and handle.last_updated_at
    assert {"ttlMs", "pollIntervalMs"} <= set(handle.model_extra or {})
    await anyio.sleep(RUN_SECONDS + 0.1)  # the runs have ended (the sandbox's clock): the first read says so
    seen: list[str] = []
    for index in range(3):  # each replica opens the id and answers, with no store
        async with http_client(fleet.replica(index).url, sandbox, extensions=[TaskPoller()]) as replica:
            seen.append((await get_task(replica, task_ids[0])).status)
    ends: dict[str, Any] = {}
    async with http_client(fleet.url, sandbox, extensions=[TaskPoller()]) as client:
        async with anyio.create_task_group() as group:
            for task_id in task_ids:
                async def follow(task_id: str = task_id) -> None:
                    ends[task_id] = await finished(client, task_id)
                group.start_soon(follow)
        direct = [await client.call_tool("get_agent_run", {"agent_run_id": run_of(handle)})
                  for handle in poller.handles]
    assert seen == ["completed"] * 3
    outcomes = set()
    for handle, answer in zip(poller.handles, direct, strict=True):
        done = ends[handle.task_id]
        result = done.model_extra["result"]
        status = answer.structured_content["status"]
        outcomes.add((status, result["isError"]))
        assert done.status == "completed" and f"ended {status}" in done.status_message
        assert {k: v for k, v in result["structuredContent"].items() if k != "waited_seconds"} == {
            k: v for k, v in answer.structured_content.items() if k != "waited_seconds"}
        assert result["content"][0]["text"] == answer.content[0].text
    assert outcomes == {("COMPLETE", False), ("ERROR", True)}  # a run that ended in error: completed, isError


@pytest.mark.anyio
async def test_pollers_on_every_replica_share_one_read_per_interval(fleet: Fleet, sandbox: SandboxServer) -> None:
    poller = TaskPoller(follow=False)
    async with http_client(fleet.url, sandbox, extensions=[poller]) as client:
        task_id = await started(client, poller)
        run_id = run_of(poller.handles[-1])
        before = reads_of(sandbox, run_id)
        clock = anyio.current_time()
        async with anyio.create_task_group() as group:
            for _ in range(30):  # 30 polls at once, round robin over the 3 replicas
                group.start_soon(get_task, client, task_id)
        intervals = 1 + int((anyio.current_time() - clock) // 5)
    assert 1 <= reads_of(sandbox, run_id) - before <= intervals


@pytest.mark.anyio
async def test_cancel_is_acknowledged_and_never_claims_the_run_stopped(fleet: Fleet, sandbox: SandboxServer) -> None:
    """A cancel where no tool that stops a run is offered (a read-only connection, or none there is): every later
    message says the run was not cancelled and, while no operation stops a run, names the tool the descriptions say
    comes closest, in sentences, until the task ends and after; a request not offered that tool reads the rest."""
    poller = TaskPoller(follow=False)
    async with http_client(fleet.url, sandbox, extensions=[poller]) as client:
        task_id = await started(client, poller)
        async with http_client(fleet.url, sandbox, read_only=True, extensions=[TaskPoller()]) as reading:
            ack = await request(reading, CancelTask, task_id)
        after = [await get_task(client, task_id) for _ in range(3)]  # on each replica: the request is shared
        ended = await finished(client, task_id)
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {DEMO_TOKEN}", "x-mcp-toolsets": "runs",
                                       "x-organization-id": str(sandbox.org_id)}, timeout=30)
    async with Client(streamable_http_client(fleet.url, http_client=http), extensions=[TaskPoller()]) as narrowed:
        unnamed = await get_task(narrowed, task_id)
    assert ack.model_extra == {"resultType": "complete"}
    assert all(state.status in ("working", "completed") for state in after) and ended.status == "completed"
    said = "cannot cancel an agent run" if CLOSEST_TO_CANCEL else "no tool that stops an agent run is offered"
    for state in [*after, ended]:
        message = state.status_message or ""
        assert said in message and message.endswith(".") and ". ." not in message
        assert CLOSEST_TO_CANCEL is None or (
            f"{CLOSEST_TO_CANCEL} comes closest, only on the user's explicit request" in message), message
        assert ("goes on" in message) is (state.status == "working"), message
    assert said in unnamed.status_message
    assert CLOSEST_TO_CANCEL is None or CLOSEST_TO_CANCEL not in unnamed.status_message


@pytest.mark.anyio
async def test_foreign_and_altered_ids_are_not_found_and_cost_nothing(fleet: Fleet, sandbox: SandboxServer) -> None:
    poller = TaskPoller(follow=False)
    async with http_client(fleet.url, sandbox, extensions=[poller]) as client:
        task_id = await started(client, poller)
    body = task_id.removeprefix("run-task.")
    altered = "run-task." + body[:20] + ("A" if body[20] != "A" else "B") + body[21:]
    sent = [r for r in sandbox.request_log if r.operation == "get_agent_run"]
    refusals: list[str] = []
    async with http_client(fleet.url, sandbox, token=OTHER_TOKEN, extensions=[TaskPoller()]) as other:
        with pytest.raises(MCPError) as foreign:
            await get_task(other, task_id)
        refusals.append(foreign.value.error.message)
    other_org = next(org for org in sandbox.state.config.visible_org_ids if org != sandbox.org_id)
    async with http_client(fleet.url, sandbox, extensions=[TaskPoller()], org_id=other_org) as elsewhere:
        with pytest.raises(MCPError) as other_organisation:  # the same token, in another organisation
            await get_task(elsewhere, task_id)
        refusals.append(other_organisation.value.error.message)
    async with http_client(fleet.url, sandbox, extensions=[TaskPoller()]) as client:
        for bad in (altered, task_id[:-2], "run-task.x", "a" * 5000):
            with pytest.raises(MCPError) as refused:
                await get_task(client, bad)
            refusals.append(refused.value.error.message)
            assert refused.value.error.code == -32602
    assert refusals[:5] == ["Task not found"] * 5  # the last is too long to be an id: refused as a bad parameter
    assert [r for r in sandbox.request_log if r.operation == "get_agent_run"] == sent


@pytest.mark.anyio
async def test_legacy_tasks_through_the_balancer(fleet: Fleet, sandbox: SandboxServer) -> None:
    async with http_client(fleet.url, sandbox, mode="legacy") as client:
        short = await call_as_task(client, "create_agent_run", {"prompt": "short-lived"}, ttl_ms=1000)
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        answer = await call_as_task(client, "resume_agent_run", {"agent_run_id": (await client.call_tool(
            "create_agent_run", {"prompt": "first"})).structured_content["id"], "prompt": "and then"})
        task_id = answer["task"]["taskId"]
        await anyio.sleep(RUN_SECONDS + 0.1)  # the run has ended: the first status read (tasks/list's) says so
        listed = await request(client, ListTasks)
        result = await request(client, TaskResult, task_id)  # the short task's 1 s are over
        state = await get_task(client, task_id)
        with pytest.raises(MCPError) as ended:
            await request(client, CancelTask, task_id)
        working = (await call_as_task(client, "create_agent_run", {"prompt": "cancel me"}))["task"]["taskId"]
        async with http_client(fleet.url, sandbox, read_only=True, mode="legacy") as reading:  # offered no stop
            cancelled = await request(reading, CancelTask, working)
        with pytest.raises(MCPError) as not_a_task:
            await call_as_task(client, "list_agent_runs", {})
        with pytest.raises(MCPError) as expired:
            await get_task(client, short["task"]["taskId"])
    async with http_client(fleet.url, sandbox, token=OTHER_TOKEN, mode="legacy") as other:
        theirs = await request(other, ListTasks)
    assert tools["create_agent_run"].execution.task_support == "optional"
    assert tools["get_agent_run"].execution is None
    assert answer["task"]["status"] == "working" and {"ttl", "pollInterval"} <= set(answer["task"])
    assert task_id in [task["taskId"] for task in listed.model_extra["tasks"]]
    assert task_id not in [task["taskId"] for task in theirs.model_extra["tasks"]]
    assert result.model_extra["structuredContent"]["is_terminal"] is True
    assert result.meta["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
    assert state.status == "completed" and ended.value.error.message == "Task already completed: nothing to cancel"
    assert cancelled.model_extra["status"] == "working" and "Cancel was asked" in cancelled.model_extra["statusMessage"]
    assert not_a_task.value.error.code == -32601
    assert "expired" in expired.value.error.message and "get_agent_run" in expired.value.error.data["hint"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_tasks_over_stdio(sandbox: SandboxServer, mode: str) -> None:
    # 2026-07-28: the SDK's claim resolver follows the task to the end; its first poll comes after the run's 1.5 s
    poller = TaskPoller(poll_seconds=2.0)
    async with Client(stdio_server(sandbox_env(sandbox)), mode=mode, extensions=[poller]) as client:
        if mode == "auto":
            result = await client.call_tool("generate_setup_commands", {"repo_id": REPO_ID})
            assert result.structured_content["is_terminal"] is True and len(poller.handles) == 1
        else:
            task = (await call_as_task(client, "generate_setup_commands", {"repo_id": REPO_ID}))["task"]
            state = await get_task(client, task["taskId"])
            assert task["status"] == state.status == "working" and not poller.handles


@dataclass
class Listened:
    """One task as a listen stream on replica 0 heard it while replica 1 polled it to its end."""

    task_id: str
    listener: TaskPoller
    state: Any  # replica 1's last answer
    ended: Any  # the listen request's answer
    before: list[float]  # replicas 0 and 1's upstream reads once the task was started
    # Seconds this process (the client, the sandbox's thread) and the two replicas waited for a CPU between the start
    # of the run and the stream's first notice, summed over their threads: the time the run's RUN_SECONDS went to.
    kept_waiting: float

    @property
    def starved(self) -> bool:
        """Whether the machine, not the stream, let the run end before the stream's first read."""
        return self.listener.notices[0].status != "working" and self.kept_waiting > RUN_SECONDS / 2


async def listen_while_another_replica_polls(fleet: Fleet, sandbox: SandboxServer) -> Listened:
    poller, listener = TaskPoller(follow=False), TaskPoller(follow=False)
    # Both sessions are open before the run starts: its RUN_SECONDS go to the listen stream's first read.
    processes = ("self", fleet.replica(0).process.pid, fleet.replica(1).process.pid)
    async with http_client(fleet.replica(0).url, sandbox, extensions=[listener]) as listening, \
            http_client(fleet.replica(1).url, sandbox, extensions=[TaskPoller()]) as polling:
        async with http_client(fleet.url, sandbox, extensions=[poller]) as client:
            waits = waiting_for_cpu_in(*processes)
            task_id = await started(client, poller)
        before = [upstream_reads(fleet.replica(index)) for index in (0, 1)]
        ended: list[Any] = []

        async def hear() -> None:
            with anyio.fail_after(60):
                ended.append(await listen(listening, [task_id, "run-task.not-one-of-yours"]))

        async with anyio.create_task_group() as group:
            group.start_soon(hear)
            with anyio.fail_after(60):
                while not listener.notices:  # the stream's first read: polling starts once it has heard
                    await anyio.sleep(0.05)
            kept_waiting = sum(waited_since(waits, waiting_for_cpu_in(*processes)))
            state = await finished(polling, task_id)  # replica 1 reads the end; replica 0's stream hears it
        with anyio.move_on_after(10):  # notifications may trail the stream's end (on a busy machine, a while)
            while listener.notices[-1].status == "working":
                await anyio.sleep(0.05)
    return Listened(task_id, listener, state, ended[0] if ended else None, before, kept_waiting)


@pytest.mark.anyio
async def test_a_listener_hears_the_end_on_another_replica_than_the_poller(fleet: Fleet,
                                                                          sandbox: SandboxServer) -> None:
    """The run ends RUN_SECONDS after it starts, on the sandbox's clock, however slow the machine. Should the listen
    stream hear of the task only after that (its first notice "completed"), no other replica read the end while it
    listened, which is what is tested here: a new task is started, up to ATTEMPTS times that the machine did not
    starve (MOST_ATTEMPTS in all)."""
    missed = 0
    for _ in range(MOST_ATTEMPTS):
        listened = await listen_while_another_replica_polls(fleet, sandbox)
        if listened.listener.notices[0].status == "working":
            break
        missed += not listened.starved
        if missed == ATTEMPTS:
            break
    else:  # every run ended before the stream's first read, most held up by the machine: nothing to tell
        pytest.skip(f"{MOST_ATTEMPTS - missed} of {MOST_ATTEMPTS} runs ended before the stream's first read on a "
                    "machine too busy to tell")
    task_id, listener, state = listened.task_id, listened.listener, listened.state
    async with http_client(fleet.replica(2).url, sandbox) as undeclared:
        with pytest.raises(MCPError) as missing:
            await listen(undeclared, [task_id])
    assert missing.value.error.code == -32021
    listener_reads, poller_reads = (upstream_reads(fleet.replica(index)) - was
                                    for index, was in zip((0, 1), listened.before, strict=True))
    heard = [(notice.task_id, notice.status) for notice in listener.notices]
    # Replica 1's polls read the end (the listening stream reads only after 1.5 intervals with no read by anyone):
    # replica 0 made at most the stream's first read, which found the run working.
    assert heard[0][1] == "working", (f"{missed} runs had ended before their listen stream's first read, with the "
                                      f"machine's CPU to spare (last: {listened.kept_waiting:.2f} s waited for one)")
    assert poller_reads >= 1 and listener_reads <= 1
    assert heard == [(task_id, "working"), (task_id, "completed")], heard
    assert state.status == "completed" and listened.ended and listened.ended.meta
    last = listener.notices[-1].model_extra
    assert last["result"] == state.model_extra["result"]


@pytest.mark.anyio
async def test_listen_streams_leave_redis_to_pacing_and_each_tenant_its_share(fleet: Fleet,
                                                                              sandbox: SandboxServer) -> None:
    """More quiet listen streams on one replica than its Redis connections, for longer than a Redis command may
    take: Redis stays reachable for pacing (its ping, as /readyz says), and one tenant holds at most its share."""
    tenants = (DEMO_TOKEN, OTHER_TOKEN, *LISTENERS)
    assert len(tenants) * MAX_TENANT_STREAMS > REDIS_CONNECTIONS  # past the pool's size, each tenant at its share
    pollers = {token: TaskPoller(follow=False) for token in tenants}
    replica = fleet.replica(2)
    async with AsyncExitStack() as stack:
        clients = {token: await stack.enter_async_context(http_client(replica.url, sandbox, token=token,
                                                                      extensions=[pollers[token]]))
                   for token in tenants}
        async with anyio.create_task_group() as group:
            for token, requester in clients.items():
                task_id = await started(requester, pollers[token])
                for _ in range(MAX_TENANT_STREAMS):  # the run's first read (working) serves every stream for 5 s
                    group.start_soon(listen, requester, [task_id])
            for _ in range(200):
                if sum(len(poller.notices) for poller in pollers.values()) == len(tenants) * MAX_TENANT_STREAMS:
                    break
                await anyio.sleep(0.05)
            await anyio.sleep(REDIS_TIMEOUT + 0.5)  # every stream quiet for longer than a Redis read may take
            async with httpx2.AsyncClient(timeout=30) as probe:
                ready = (await probe.get(f"{replica.origin}/readyz")).json()
            with pytest.raises(MCPError) as refused:
                await listen(clients[DEMO_TOKEN], [pollers[DEMO_TOKEN].handles[-1].task_id])
            group.cancel_scope.cancel()
    for poller in pollers.values():
        assert [notice.status for notice in poller.notices] == ["working"] * MAX_TENANT_STREAMS
    assert ready["redis"] == "reachable", ready
    assert refused.value.error.code == -32600
    assert f"already listen on {MAX_TENANT_STREAMS} streams" in refused.value.error.message


@pytest.mark.anyio
async def test_the_typescript_sdk_calls_a_tool_as_a_task(fleet: Fleet, sandbox: SandboxServer) -> None:
    """A client no one here wrote: the pinned `@modelcontextprotocol/sdk` (2025-11-25 tasks), through the balancer."""
    if shutil.which("node") is None or not (TS_CLIENT / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.skip("tests/e2e/ts_client is not installed (npm ci --prefix tests/e2e/ts_client; .ci/run does it)")
    env = {**os.environ, "MCP_TOKEN": sandbox.token, "MCP_ORG": str(sandbox.org_id)}
    done = await anyio.run_process(["node", str(TS_CLIENT / "task_client.mjs"), fleet.url, "create_agent_run",
                                    json.dumps({"prompt": "From TypeScript"})], env=env, check=False)
    lines = [json.loads(line) for line in done.stdout.decode().splitlines()]
    kinds = [line["type"] for line in lines]
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert lines[0]["version"] == "2025-11-25" and "tasks" in lines[0]["capabilities"]
    assert kinds[:2] == ["protocol", "taskCreated"] and kinds[-3:] == ["result", "get", "list"], kinds
    task_id = lines[1]["task"]["taskId"]
    result = lines[-3]["result"]
    assert result["structuredContent"]["is_terminal"] is True and "resultType" not in result
    assert lines[-2]["task"]["status"] == "completed" and task_id in lines[-1]["tasks"]
