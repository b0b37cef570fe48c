"""A flood of task listen streams from eight tokens: what a colleague's listens get, and how long a drain then takes.

    .venv/bin/python benchmarks/listen_flood.py [--before SRC] [--write docs/benchmarks.md]

Per code measured (this tree's, and with `--before SRC` another tree's, e.g. `git archive main src manifests |
tar -x -C /tmp/main`, then `--before /tmp/main/src`): a sandbox whose runs last 10 minutes, a redis-server, 3
replicas (`--auth request`) and HAProxy running that tree's `manifests/haproxy/haproxy.cfg`. Each of 8 tokens
starts a run as a task, then, from a loopback address of its own, keeps 96 `subscriptions/listen` streams going on
it (an eighth of every replica's 256): a refused listen is asked again 0.2 s later, an ended one at once. Once the
flood has held steady, a colleague listens 6 times (a new connection each, so round robin meets every replica);
then one replica gets SIGTERM with the flood's streams open, and the seconds until it exits are counted (its grace
is 60 s). Loopback only; everything it starts it stops.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections import Counter
from contextlib import ExitStack
from typing import Any, Final, Literal

import anyio
import httpx2
from fleet import ServerProcess, balanced_fleet
from mcp import Client
from mcp.client import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, Result
from pydantic import ConfigDict
from report import before_and_after

from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer

FLOODERS: Final = tuple(f"tok-listen-flood-{i}" for i in range(8))
COLLEAGUE: Final = "tok-listen-colleague"
STREAMS_EACH: Final = 3 * 256 // len(FLOODERS)  # an eighth of every replica's streams (before: what one token held)
COLLEAGUE_LISTENS: Final = 6
SETTLE_SECONDS: Final = 20.0  # the flood's streams have all been asked for, and refused ones asked again
RETRY_SECONDS: Final = 0.2
DRAIN_LIMIT: Final = 90.0
RATE_LIMITS: Final = "standard=100000/30s,logs=100000/60s"
TASKS: Final = "io.modelcontextprotocol/tasks"
HEADERS: Final = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                  "mcp-protocol-version": "2026-07-28", "mcp-method": "subscriptions/listen"}


class TaskHandle(Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str


class Tasks(ClientExtension):
    """Declares the tasks extension and keeps the task a `tools/call` was answered with."""

    identifier = TASKS

    def __init__(self) -> None:
        self.task_ids: list[str] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self._resolve)]

    async def _resolve(self, handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
        self.task_ids.append(handle.task_id)
        return CallToolResult(content=[], structured_content={"task": handle.model_dump(by_alias=True)})


async def task_of(url: str, token: str, org_id: int) -> str:
    tasks = Tasks()
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}", "x-organization-id": str(org_id)},
                              timeout=httpx2.Timeout(60))
    async with Client(streamable_http_client(url, http_client=http), extensions=[tasks]) as client:
        await client.call_tool("create_agent_run", {"prompt": "Listen to me"})
    return tasks.task_ids[-1]


async def listen(http: httpx2.AsyncClient, url: str, token: str, task_id: str, request_id: int,
                 open_now: list[int]) -> str:
    """One listen, counted in `open_now` while acknowledged and open: `held` (once it ended), or why it was
    refused: `tenant`, `replica`, `dropped` (the connection), or an HTTP status."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}
    call = {"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": [task_id]}, "_meta": meta}}
    acknowledged = False
    try:
        headers = HEADERS | {"authorization": f"Bearer {token}"}
        async with http.stream("POST", url, json=call, headers=headers) as answer:
            async for line in answer.aiter_lines():  # server-sent events, or one JSON body
                if not line.startswith(("data:", "{")):
                    continue
                message = json.loads(line.removeprefix("data:"))
                if "error" in message:
                    text = message["error"].get("message", "")
                    return "tenant" if "streams on this replica" in text else \
                        "replica" if "limit reached" in text else "error"
                if message.get("method") == "notifications/subscriptions/acknowledged":
                    acknowledged = True
                    open_now[0] += 1
            return "held" if acknowledged else f"http {answer.status_code}"
    except httpx2.HTTPError:
        return "held" if acknowledged else "dropped"
    finally:
        if acknowledged:
            open_now[0] -= 1


async def flood(url: str, token: str, task_id: str, address: str, counts: Counter[str], open_now: list[int],
                stop: anyio.Event) -> None:
    """`STREAMS_EACH` streams kept going from `address`: a refused one asked again after a pause, an ended one at
    once, until `stop`."""
    transport = httpx2.AsyncHTTPTransport(local_address=address, limits=httpx2.Limits(max_connections=STREAMS_EACH))

    async def stream(request_id: int) -> None:
        while True:
            outcome = await listen(http, url, token, task_id, request_id, open_now)
            counts[outcome] += 1
            request_id += STREAMS_EACH
            if outcome != "held":
                await anyio.sleep(RETRY_SECONDS)

    async with httpx2.AsyncClient(transport=transport, timeout=httpx2.Timeout(90)) as http, \
            anyio.create_task_group() as group:
        for first_id in range(STREAMS_EACH):
            group.start_soon(stream, first_id)
        await stop.wait()
        group.cancel_scope.cancel()


async def colleague_listens(url: str, task_id: str) -> list[str]:
    """Each listen: `held` once acknowledged (then left), or why it was refused."""
    outcomes = []
    for attempt in range(COLLEAGUE_LISTENS):
        open_now, outcome = [0], []
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30)) as http, anyio.create_task_group() as group:
            async def once(attempt: int = attempt, open_now: list[int] = open_now, outcome: list[str] = outcome
                           ) -> None:
                outcome.append(await listen(http, url, COLLEAGUE, task_id, attempt, open_now))

            group.start_soon(once)
            with anyio.move_on_after(30):
                while not outcome and not open_now[0]:
                    await anyio.sleep(0.05)
            held = open_now[0] > 0  # (before the cancel below closes it)
            group.cancel_scope.cancel()
        outcomes.append("held" if held else (outcome or ["no answer"])[0])
    return outcomes


async def measure() -> dict[str, Any]:
    config = SandboxConfig(tokens=(*FLOODERS, COLLEAGUE), run_seconds=600.0, seed=5)
    with SandboxServer(config) as sandbox, ExitStack() as stack:
        balancer, replicas = balanced_fleet(stack, {"AGENT_AUTOMATION_BASE_URL": sandbox.url,
                                                    "AGENT_AUTOMATION_RATE_LIMITS": RATE_LIMITS,
                                                    "AGENT_AUTOMATION_LOG_LEVEL": "WARNING"})
        url = f"{balancer.url}/mcp"
        tasks = {token: await task_of(url, token, sandbox.org_id) for token in (*FLOODERS, COLLEAGUE)}
        counts: dict[str, Counter[str]] = {token: Counter() for token in FLOODERS}
        open_now = [0]
        stop = anyio.Event()
        async with anyio.create_task_group() as group:
            for index, token in enumerate(FLOODERS):
                group.start_soon(flood, url, token, tasks[token], f"127.0.0.{20 + index}", counts[token], open_now,
                                 stop)
            await anyio.sleep(SETTLE_SECONDS)
            held = open_now[0]
            colleague = await colleague_listens(url, tasks[COLLEAGUE])
            drained_at = time.monotonic()
            replicas[0].process.send_signal(signal.SIGTERM)
            drain_seconds = await anyio.to_thread.run_sync(lambda: _exit_seconds(replicas[0], drained_at))
            stop.set()
        refused = Counter[str]()
        for token_counts in counts.values():
            refused.update({k: v for k, v in token_counts.items() if k != "held"})
        return {"held": held, "colleague": dict(Counter(colleague)), "refused": dict(refused),
                "drain_seconds": drain_seconds, "load": os.getloadavg()[0]}


def _exit_seconds(replica: ServerProcess, since: float) -> float | None:
    try:
        replica.process.wait(timeout=DRAIN_LIMIT)
    except Exception:
        return None
    return time.monotonic() - since


def render(rows: dict[str, Any], command: str) -> str:
    lines = ["## Task listen streams: eight tokens against a colleague", "",
             f"`{command}`. 3 replicas (`--auth request`) sharing Redis behind the tree's HAProxy; {len(FLOODERS)} "
             f"tokens, each from its own address, keep {STREAMS_EACH} `subscriptions/listen` streams going (a "
             f"refused one asked again {RETRY_SECONDS:g} s later); after {SETTLE_SECONDS:g} s a colleague listens "
             f"{COLLEAGUE_LISTENS} times, a new connection each; then one replica gets SIGTERM with the flood's "
             "streams open (grace 60 s). 2 shared cores; the load average is the 1-minute one at the end of the row.",
             "", "| code | flood's streams open | the flood's refusals (reason: count) | the colleague's listens | "
             "drain with streams open | load |", "|---|---|---|---|---|---|"]
    for name, row in rows.items():
        refused = ", ".join(f"{reason}: {n:,}" for reason, n in sorted(row["refused"].items())) or "none"
        colleague = ", ".join(f"{n} {outcome}" for outcome, n in sorted(row["colleague"].items()))
        drain = "over 90 s" if row["drain_seconds"] is None else f"{row['drain_seconds']:.1f} s"
        lines.append(f"| {name} | {row['held']:,} | {refused} | {colleague} | {drain} | {row['load']:.1f} |")
    return "\n".join([*lines, "", "Before, a token held 32 streams on each replica and a replica 256, so eight "
                      "tokens held all 768 and the colleague was refused; the drain waited for its grace. Now a "
                      "tenant (a Codegen user, all its tokens together) holds 8 on each replica, and a drain ends "
                      "the streams at once.", ""])


if __name__ == "__main__":
    sys.exit(before_and_after("listen_flood.py", __doc__.splitlines()[0], measure, render))
