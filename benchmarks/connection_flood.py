"""Connection floods without a token: what other clients' calls get through the shipped HAProxy meanwhile.

    .venv/bin/python benchmarks/connection_flood.py [--before SRC] [--write docs/benchmarks.md]

Per code measured (this tree's, and with `--before SRC` another tree's, e.g. `git archive main src manifests |
tar -x -C /tmp/main`, then `--before /tmp/main/src`): a sandbox, a redis-server, 3 replicas (`--auth request`)
and HAProxy running that tree's `manifests/haproxy/haproxy.cfg`. Two floods, one after the other, each from
addresses of its own in 127.0.0.0/8 (Linux answers the whole range on loopback), none with a token:

- keep-alive: 25 addresses, each in a network (/24) of its own, open 200 connections each, send one anonymous
  request on each (`POST /mcp`, answered 401) and then hold them idle, as a keep-alive client does;
- silent: one address opens 8,000 connections and sends nothing on them;
- one network: 40 addresses of one /24 open 240 connections each (under the per-address cap) and send nothing.

Neither reconnects what the balancer closes. From 1 s after a flood starts, probe calls (`list_models` from a new SDK
client each, on 127.0.0.1: a newcomer's new connection) start 2 a second, from a process of their own (so that the
flood's sockets do not slow their event loop); one not answered within 10 s timed out.
Loopback only; the flood's sockets are bounded in count and time; everything it starts it stops.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import statistics
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from typing import Any, Final

import anyio
import httpx2
from anyio.abc import SocketStream
from fleet import ServerProcess, balanced_fleet, die_with_parent
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from report import before_and_after

from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer

RATE_LIMITS: Final = "standard=100000/30s,logs=100000/60s"
PROBE_TOKEN: Final = "tok-probe"
PROBE_TIMEOUT: Final = 10.0
PROBES_PER_SECOND: Final = 2
AT_ONCE: Final = 500  # connections being opened at a time
CONNECT_TIMEOUT: Final = 5.0
HOLD_SECONDS: Final = 120.0  # the most a flood's socket is held, whatever happens


@dataclass(frozen=True)
class Flood:
    name: str
    addresses: int
    per_address: int
    sends_a_request: bool
    probes: int
    second: int  # each flood its own addresses, in 127.<second>.0.0/16
    one_network: bool  # all in one /24, or each address in its own

    @property
    def sources(self) -> list[str]:
        if self.one_network:
            return [f"127.{self.second}.0.{index + 1}" for index in range(self.addresses)]
        return [f"127.{self.second}.{index}.1" for index in range(self.addresses)]


FLOODS: Final = (Flood("keep-alive", 25, 200, True, 90, 1, False), Flood("silent", 1, 8000, False, 60, 2, False),
                 Flood("one network", 40, 240, False, 60, 3, True))


@dataclass
class Held:
    opened: int = 0  # connections the kernel accepted (HAProxy may close them at once)
    failed: int = 0  # refused or reset as they opened, or not accepted within CONNECT_TIMEOUT (a full listen queue)
    open: int = 0  # still open now
    peak: int = 0


async def hold(port: int, source: str, sends_a_request: bool, held: Held, gate: anyio.Semaphore) -> None:
    """One connection, held until the balancer closes it or the flood's task group is cancelled."""
    request = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
               "Accept: application/json, text/event-stream\r\nContent-Length: 2\r\n\r\n{}").encode()
    async with gate:
        try:
            with anyio.fail_after(CONNECT_TIMEOUT):
                connection: SocketStream = await anyio.connect_tcp("127.0.0.1", port, local_host=source)
        except (OSError, TimeoutError):
            held.failed += 1
            return
    held.opened += 1
    async with connection:
        held.open += 1
        held.peak = max(held.peak, held.open)
        try:
            if sends_a_request:
                await connection.send(request)
            with anyio.move_on_after(HOLD_SECONDS):
                while True:  # the answer, if any, then the balancer's close (EOF or reset) ends it
                    await connection.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            pass
        finally:
            held.open -= 1


async def probe(url: str, org_id: int, outcomes: list[str], seconds: list[float]) -> None:
    started = time.monotonic()
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {PROBE_TOKEN}", "x-organization-id": str(org_id)},
                              timeout=httpx2.Timeout(PROBE_TIMEOUT))
    outcome = None  # the call's, once answered: what goes wrong after (closing the client) does not change it
    try:
        with anyio.fail_after(PROBE_TIMEOUT):
            async with Client(streamable_http_client(url, http_client=http)) as client:
                outcome = "error" if (await client.call_tool("list_models", {})).is_error else "ok"
    except TimeoutError:
        outcome = outcome or "timed out"
    except Exception:
        outcome = outcome or "failed"  # a refused or dropped connection
    outcomes.append(outcome or "failed")
    if outcome == "ok":
        seconds.append(time.monotonic() - started)


def probes(url: str, org_id: int, count: int) -> tuple[list[str], list[float]]:
    """`count` probe calls, started PROBES_PER_SECOND a second: each one's outcome, and how long those answered took."""
    outcomes: list[str] = []
    seconds: list[float] = []

    async def start() -> None:
        async with anyio.create_task_group() as probing:
            for _ in range(count):
                probing.start_soon(probe, url, org_id, outcomes, seconds)
                await anyio.sleep(1 / PROBES_PER_SECOND)

    anyio.run(start)
    return outcomes, seconds


def probe_summary(outcomes: list[str], seconds: list[float]) -> dict[str, Any]:
    """What the tables show of the probes: how many timed out, failed otherwise, and were sent; the answered ones'
    median seconds (None: none answered)."""
    timed_out = outcomes.count("timed out")
    return {"timed_out": timed_out, "failed": len(outcomes) - outcomes.count("ok") - timed_out,
            "probes": len(outcomes), "p50": statistics.median(seconds) if seconds else None}


async def flood_and_probe(flood: Flood, port: int, org_id: int, prober: ProcessPoolExecutor) -> dict[str, Any]:
    held, gate = Held(), anyio.Semaphore(AT_ONCE)
    url = f"http://127.0.0.1:{port}/mcp"
    async with anyio.create_task_group() as flooding:
        for source in flood.sources:
            for _ in range(flood.per_address):
                flooding.start_soon(hold, port, source, flood.sends_a_request, held, gate)
        await anyio.sleep(1)  # the flood is under way
        outcomes, seconds = await anyio.to_thread.run_sync(prober.submit(probes, url, org_id, flood.probes).result)
        held_at_end = held.open
        flooding.cancel_scope.cancel()
    return {"opened": held.opened, "refused": held.failed, "peak": held.peak, "held_at_end": held_at_end,
            **probe_summary(outcomes, seconds), "max": max(seconds, default=None), "load": os.getloadavg()}


def more_file_descriptors() -> None:
    """The floods hold up to 8,000 sockets in this process: its soft limit raised to the hard one."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    needed = max(flood.addresses * flood.per_address for flood in FLOODS) + 1000
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise SystemExit(f"needs {needed} file descriptors, the hard limit is {hard} (ulimit -Hn)")


@contextmanager
def probed_fleet(**env: str) -> Iterator[tuple[SandboxServer, ServerProcess, list[ServerProcess],
                                               ProcessPoolExecutor]]:
    """A sandbox that knows the probes' token, 3 replicas (`--auth request`, `env` beside) behind the shipped
    HAProxy, and the process the probes run in, started before any flood."""
    with SandboxServer(SandboxConfig(tokens=(PROBE_TOKEN,), seed=5)) as sandbox, ExitStack() as stack:
        balancer, replicas = balanced_fleet(stack, {"AGENT_AUTOMATION_BASE_URL": sandbox.url,
                                                    "AGENT_AUTOMATION_RATE_LIMITS": RATE_LIMITS,
                                                    "AGENT_AUTOMATION_LOG_LEVEL": "WARNING", **env})
        with ProcessPoolExecutor(1, multiprocessing.get_context("spawn"), initializer=die_with_parent) as prober:
            prober.submit(time.monotonic).result(timeout=60)
            yield sandbox, balancer, replicas, prober


async def measure() -> dict[str, Any]:
    more_file_descriptors()
    rows = {}
    with probed_fleet() as (sandbox, balancer, _, prober):
        for flood in FLOODS:
            rows[flood.name] = await flood_and_probe(flood, balancer.port, sandbox.org_id, prober)
            await anyio.sleep(12)  # what the flood left (HAProxy's timeouts) is gone before the next one
    return {"floods": rows, "config": [asdict(flood) for flood in FLOODS]}


def render(rows: dict[str, Any], command: str) -> str:
    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f} s"

    lines = ["## Connection floods through the shipped HAProxy", "",
             f"`{command}`. 3 replicas sharing Redis behind HAProxy (`manifests/haproxy/haproxy.cfg` of the tree "
             "measured); no flood sends a token. **keep-alive**: 25 addresses, each in a /24 of its own, × 200 "
             "connections, one anonymous request on each, then held idle. **silent**: 1 address × 8,000 connections, "
             "nothing sent. **one network**: 40 addresses of one /24 × 240 connections, nothing sent. None "
             "reconnects what the balancer closes. From 1 s after a flood starts, probe calls start "
             f"{PROBES_PER_SECOND} a second from another address (`list_models`, each from a new SDK client, in a "
             f"process of their own); one not answered within {PROBE_TIMEOUT:g} s timed out. Opened: connections "
             "the kernel accepted; refused: reset as they opened or not accepted within 5 s. Held: the flood's "
             "connections open at once at most, and when the last probe ended. 2 shared cores; load average "
             "(1, 5, 15 min) at the end of the flood.", "",
             "| code | flood | connections opened (refused at once) | held: peak → at the end | probes timed out | "
             "other probe errors | answered probes: p50 / max | load |", "|---|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
        for flood, figures in row["floods"].items():
            load = " / ".join(f"{value:.1f}" for value in figures["load"])
            lines.append(f"| {name} | {flood} | {figures['opened']:,} ({figures['refused']:,}) | "
                         f"{figures['peak']:,} → {figures['held_at_end']:,} | "
                         f"{figures['timed_out']} of {figures['probes']} | {figures['failed']} | "
                         f"{seconds(figures['p50'])} / {seconds(figures['max'])} | {load} |")
    return "\n".join([*lines, ""])


if __name__ == "__main__":
    sys.exit(before_and_after("connection_flood.py", __doc__.splitlines()[0], measure, render))
