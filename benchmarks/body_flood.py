"""Request bodies from a stranger: each replica's memory, the service's token checks and a colleague's calls.

    .venv/bin/python benchmarks/body_flood.py [--before SRC] [--write docs/benchmarks.md]

Per code measured (this tree's, and with `--before SRC` another tree's, e.g. `git archive main src manifests | tar
-x -C /tmp/main`, then `--before /tmp/main/src`): a sandbox, a redis-server, 3 replicas (`--auth request`, trusting
the balancer's X-Forwarded-For as deployed) and HAProxy running that tree's `manifests/haproxy/haproxy.cfg`. Floods,
one after the other, each from one address of its own in 127.0.0.0/8 (Linux answers the whole range on loopback):
keep-alive connections, each sending `POST /mcp` with a 1 MiB body of empty JSON objects (`[{},{},...]`) again as
soon as the last is answered (a new connection when the balancer closes one): 200 for 60 s without a token, as many
with a new junk token each, and 60 for 15 s without a token straight to one replica (`FLOODS`). Each replica's
resident memory is read from /proc every 0.2 s; a flood is cut short once a replica passes `SAFETY_MIB` (the machine
is shared). From 1 s after a flood starts, a colleague's calls (`list_models` from a new SDK client each, on
127.0.0.1, in a process of their own) start 2 a second; one not answered within 10 s timed out. Loopback only; the
flood is bounded in count and time; everything it starts it stops.
"""

from __future__ import annotations

import os
import secrets
import statistics
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, Final

import anyio
import httpx2
from connection_flood import PROBE_TIMEOUT, PROBES_PER_SECOND, probe_summary, probed_fleet, probes
from fleet import ServerProcess
from report import answer_counts, before_and_after

from agent_automation_mcp.sandbox import SandboxServer

BODY: Final = b"[" + b"{}," * (1024 * 1024 // 3 - 1) + b"{}]"  # 1 MiB: what costs the most objects per byte
SAFETY_MIB: Final = 1536  # a flood stops once a replica holds this much
SAMPLE_SECONDS: Final = 0.2
SETTLE_SECONDS: Final = 10.0  # after a flood: HAProxy's timeouts and the replicas' memory, before the next
HEADERS: Final = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                  "mcp-protocol-version": "2025-11-25"}


@dataclass(frozen=True)
class Flood:
    name: str
    source: str
    connections: int
    seconds: float
    junk_tokens: bool
    straight: bool  # to one replica, past the balancer
    probes: int


FLOODS: Final = (Flood("no token", "127.0.4.1", 200, 60.0, False, False, 118),
                 Flood("junk tokens", "127.0.4.2", 200, 60.0, True, False, 118),
                 Flood("no token, one replica", "127.0.4.3", 60, 15.0, False, True, 28))


class Sampler:
    """Each replica's VmRSS every SAMPLE_SECONDS, in a thread: the peak of each, and whether one passed SAFETY_MIB."""

    def __init__(self, replicas: list[ServerProcess]) -> None:
        self.replicas = replicas
        self.peaks = [0.0 for _ in replicas]
        self.unsafe = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            for index, replica in enumerate(self.replicas):
                mib = replica.memory_kib().get("VmRSS", 0) / 1024
                self.peaks[index] = max(self.peaks[index], mib)
                if mib > SAFETY_MIB:
                    self.unsafe.set()

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


async def sender(url: str, flood: Flood, statuses: Counter[str], until: float) -> None:
    """One keep-alive connection's worth of the flood: a body sent again as soon as the last is answered."""
    transport = httpx2.AsyncHTTPTransport(local_address=flood.source, limits=httpx2.Limits(max_connections=1))
    async with httpx2.AsyncClient(transport=transport, timeout=httpx2.Timeout(15.0)) as http:
        while time.monotonic() < until:
            headers = HEADERS | ({"authorization": f"Bearer junk-{secrets.token_hex(16)}"} if flood.junk_tokens
                                 else {})
            try:
                answer = await http.post(url, content=BODY, headers=headers)
                statuses[str(answer.status_code)] += 1
            except httpx2.HTTPError as exc:
                statuses[type(exc).__name__] += 1
                await anyio.sleep(0.1)


async def flood_and_probe(flood: Flood, balancer: ServerProcess, replicas: list[ServerProcess],
                          sandbox: SandboxServer, prober: ProcessPoolExecutor) -> dict[str, Any]:
    target = replicas[0] if flood.straight else balancer
    url = f"{target.url}/mcp"
    before = [replica.memory_kib()["VmRSS"] / 1024 for replica in replicas]
    httpx2.delete(f"{sandbox.url}/_sandbox/requests")
    statuses: Counter[str] = Counter()
    started = time.monotonic()
    stopped_at = None
    with Sampler(replicas) as sampler:
        async with anyio.create_task_group() as flooding:
            for _ in range(flood.connections):
                flooding.start_soon(sender, url, flood, statuses, started + flood.seconds)

            async def watch() -> None:
                nonlocal stopped_at
                while time.monotonic() < started + flood.seconds + 15:
                    if sampler.unsafe.is_set():
                        stopped_at = time.monotonic() - started
                        flooding.cancel_scope.cancel()
                    await anyio.sleep(SAMPLE_SECONDS)

            flooding.start_soon(watch)
            await anyio.sleep(1)  # the flood is under way
            probed = prober.submit(probes, f"{balancer.url}/mcp", sandbox.org_id, flood.probes)
            outcomes, seconds = await anyio.to_thread.run_sync(probed.result)
            while time.monotonic() < started + flood.seconds and stopped_at is None:
                await anyio.sleep(SAMPLE_SECONDS)
            flooding.cancel_scope.cancel()
        await anyio.sleep(SETTLE_SECONDS)
    checks = len(httpx2.get(f"{sandbox.url}/_sandbox/requests", params={"operation": "get_current_user"}).json())
    return {"before_mib": before, "peak_mib": sampler.peaks,
            "after_mib": [replica.memory_kib()["VmRSS"] / 1024 for replica in replicas],
            "stopped_at": stopped_at, "statuses": dict(statuses), "upstream_checks": checks,
            **probe_summary(outcomes, seconds),
            "p90": statistics.quantiles(seconds, n=10)[-1] if len(seconds) > 1 else None,
            "load": os.getloadavg()[0]}


async def measure() -> dict[str, Any]:
    rows = {}
    # The replicas trust the balancer's X-Forwarded-For, as deployed: each client spends its own address's budgets.
    with probed_fleet(AGENT_AUTOMATION_TRUSTED_PROXIES="127.0.0.1") as (sandbox, balancer, replicas, prober):
        for flood in FLOODS:
            rows[flood.name] = await flood_and_probe(flood, balancer, replicas, sandbox, prober)
    return {"floods": rows, "config": [asdict(flood) for flood in FLOODS]}


def render(rows: dict[str, Any], command: str) -> str:
    def mib(values: list[float]) -> str:
        return " / ".join(f"{value:.0f}" for value in values)

    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f} s"

    through = next(flood for flood in FLOODS if not flood.straight)
    straight = next(flood for flood in FLOODS if flood.straight)
    lines = ["## Request bodies from a stranger", "",
             f"`{command}`. 3 replicas (`--auth request`) sharing Redis behind HAProxy "
             f"(`manifests/haproxy/haproxy.cfg` of the tree measured). Each flood comes from one address of its "
             f"own: keep-alive connections each sending `POST /mcp` with a 1 MiB body of empty JSON objects "
             f"(`[{{}},{{}},...]`) again as soon as the last is answered, without a token or with a new junk token "
             f"each; the last one straight to one replica. Each replica's resident memory is read every "
             f"{SAMPLE_SECONDS:g} s (MiB, replica 1 / 2 / 3); a flood is cut short once a replica passes "
             f"{SAFETY_MIB:,} MiB. From 1 s in, a colleague's calls (`list_models`, a new SDK client each, through "
             f"the balancer) start {PROBES_PER_SECOND} a second; one not answered within {PROBE_TIMEOUT:g} s timed "
             f"out. Token checks: requests the service got for `GET /v1/users/me` during the flood. As the review's "
             f"floods: {through.connections} connections for {through.seconds:g} s through the balancer, "
             f"{straight.connections} for {straight.seconds:g} s straight to a replica; on 2 shared cores, the "
             f"flood's sender in the same process as the colleague's clock. Load: the 1-minute average at the end.",
             "",
             f"| code | flood | answers | RSS before → peak → {SETTLE_SECONDS:g} s after | token checks | colleague: "
             "timed out, failed of calls | answered: p50 / p90 | load |", "|---|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
        for flood, figures in row["floods"].items():
            answers = answer_counts(figures["statuses"])
            cut = f" (cut at {figures['stopped_at']:.0f} s)" if figures["stopped_at"] is not None else ""
            lines.append(f"| {name} | {flood}{cut} | {answers} | {mib(figures['before_mib'])} → "
                         f"{mib(figures['peak_mib'])} → {mib(figures['after_mib'])} | {figures['upstream_checks']} | "
                         f"{figures['timed_out']}, {figures['failed']} of {figures['probes']} | "
                         f"{seconds(figures['p50'])} / {seconds(figures['p90'])} | {figures['load']:.1f} |")
    return "\n".join([*lines, ""])


if __name__ == "__main__":
    sys.exit(before_and_after("body_flood.py", __doc__.splitlines()[0], measure, render))
