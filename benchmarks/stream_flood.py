"""A flood of listening streams from one token: what it holds, and what the other tenants see meanwhile.

    .venv/bin/python benchmarks/stream_flood.py [--before SRC] [--write docs/benchmarks.md]

Per code measured (this tree's, and with `--before SRC` another tree's, e.g. `git archive main src manifests |
tar -x -C /tmp/main`, then `--before /tmp/main/src`): a sandbox, a redis-server, 3 replicas (`--auth request`)
and HAProxy running that tree's `manifests/haproxy/haproxy.cfg`. One token opens 4,000 legacy-era (2025-11-25)
`GET /mcp` listening streams through HAProxy, 500 connecting at a time, each held for as long as the server keeps
it open; meanwhile another tenant makes calls, each a new SDK client (a new connection, as a newcomer's), before
the flood and while it is held. Loopback only; everything it starts it stops.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from contextlib import ExitStack
from typing import Any, Final

import anyio
import httpx2
from fleet import ServerProcess, balanced_fleet
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from report import answer_counts, before_and_after

from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer

STREAMS: Final = 4000
AT_ONCE: Final = 500
CALLS: Final = 10  # the other tenant's calls in each phase
CALL_TIMEOUT: Final = 20.0  # seconds one call may take before it counts as failed
RATE_LIMITS: Final = "standard=100000/30s,logs=100000/60s"
OTHER: Final = "tok-other-tenant"


async def other_tenant_calls(url: str, org_id: int) -> dict[str, Any]:
    seconds: list[float] = []
    failed = 0
    for _ in range(CALLS):
        started = time.monotonic()
        http = httpx2.AsyncClient(headers={"authorization": f"Bearer {OTHER}", "x-organization-id": str(org_id)},
                                  timeout=httpx2.Timeout(CALL_TIMEOUT))
        try:
            with anyio.fail_after(CALL_TIMEOUT):
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    failed += bool((await client.call_tool("list_models", {})).is_error)
            seconds.append(time.monotonic() - started)
        except Exception:  # a timeout, a refused or dropped connection: the call did not get through
            failed += 1
    return {"p50": statistics.median(seconds) if seconds else None, "max": max(seconds, default=None),
            "failed": failed}


async def flood(port: int, token: str, held: dict[str, int], stop: anyio.Event) -> None:
    request = (f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
               f"Mcp-Protocol-Version: 2025-11-25\r\nAuthorization: Bearer {token}\r\n\r\n").encode()
    gate = anyio.Semaphore(AT_ONCE)

    async def stream() -> None:
        async with gate:
            try:
                connection = await anyio.connect_tcp("127.0.0.1", port)
                await connection.send(request)
                with anyio.fail_after(30):
                    head = await connection.receive()
            except Exception:
                held["failed"] += 1
                return
        status = head.split(b" ", 2)[1].decode() if head.startswith(b"HTTP/") else "?"
        held[status] = held.get(status, 0) + 1
        async with connection:
            if status == "200":  # a stream: held open until the client leaves (or the server ends it)
                held["open"] += 1
                with anyio.move_on_after(120):
                    await stop.wait()
                held["open"] -= 1

    async with anyio.create_task_group() as group:
        for _ in range(STREAMS):
            group.start_soon(stream)


def replicas_rss_kib(replicas: list[ServerProcess]) -> int:
    return sum(replica.memory_kib().get("VmRSS", 0) for replica in replicas)


async def measure() -> dict[str, Any]:
    config = SandboxConfig(tokens=("tok-flooder", OTHER), seed=5)
    with SandboxServer(config) as sandbox, ExitStack() as stack:
        balancer, replicas = balanced_fleet(stack, {"AGENT_AUTOMATION_BASE_URL": sandbox.url,
                                                    "AGENT_AUTOMATION_RATE_LIMITS": RATE_LIMITS})
        port = balancer.port
        url = f"http://127.0.0.1:{port}/mcp"
        baseline = await other_tenant_calls(url, sandbox.org_id)
        rss_before = replicas_rss_kib(replicas)
        held: dict[str, int] = {"open": 0, "failed": 0}
        stop = anyio.Event()
        async with anyio.create_task_group() as group:
            started = time.monotonic()
            group.start_soon(flood, port, "tok-flooder", held, stop)
            await anyio.sleep(5)  # the flood is under way
            during = await other_tenant_calls(url, sandbox.org_id)
            peak_open = held["open"]
            rss_during = replicas_rss_kib(replicas)
            stop.set()
        flood_seconds = time.monotonic() - started
        return {"statuses": {k: v for k, v in held.items() if k != "open"}, "held_open": peak_open,
                "baseline": baseline, "during": during, "rss_before_mib": rss_before / 1024,
                "rss_during_mib": rss_during / 1024, "flood_seconds": flood_seconds,
                "load": os.getloadavg()[0]}


def render(rows: dict[str, Any], command: str) -> str:
    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f} s"

    lines = ["## Listening-stream flood through the shipped HAProxy", "",
             f"`{command}`. 1 token opens {STREAMS:,} legacy-era `GET /mcp` streams through HAProxy "
             f"(`manifests/haproxy/haproxy.cfg` of the tree measured) in front of 3 replicas sharing Redis, "
             f"{AT_ONCE} connecting at a time, each held while the server keeps it open; another tenant makes "
             f"{CALLS} calls (`list_models`, each from a new SDK client: a new connection) before the flood and "
             f"while it is held (a call failed: not answered within {CALL_TIMEOUT:g} s, or refused). 2 shared "
             "cores; the load average is the 1-minute one at the end of the row.", "",
             "| code | answers to the 4,000 GETs | streams held | other tenant before: p50 / max | during: "
             "p50 / max | calls failed during | replicas' RSS before → during | load |",
             "|---|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
        answers = answer_counts(row["statuses"])
        lines.append(f"| {name} | {answers} | {row['held_open']:,} | {seconds(row['baseline']['p50'])} / "
                     f"{seconds(row['baseline']['max'])} | {seconds(row['during']['p50'])} / "
                     f"{seconds(row['during']['max'])} | {row['during']['failed']} of {CALLS} | "
                     f"{row['rss_before_mib']:.0f} → {row['rss_during_mib']:.0f} MiB | {row['load']:.1f} |")
    return "\n".join([*lines, ""])


if __name__ == "__main__":
    sys.exit(before_and_after("stream_flood.py", __doc__.splitlines()[0], measure, render))
