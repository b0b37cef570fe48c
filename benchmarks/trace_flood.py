"""A replica's memory, and what it exports, while one tenant sends tool calls with huge names and ids, traces on.

    .venv/bin/python benchmarks/trace_flood.py [--before SRC] [--write docs/benchmarks.md]

Per code measured (this tree's, and with `--before SRC` another tree's, e.g. `git archive main src | tar -x -C
/tmp/main`, then `--before /tmp/main/src`): a sandbox, one replica (`serve --transport http --auth request`) with
traces on (every span sampled, exported over OTLP to a collector in this process that counts what it receives and
keeps nothing), and one tenant with a valid token. After a few ordinary calls, the tenant sends `CALLS` raw
2025-11-25 `tools/call` requests, `AT_ONCE` at a time, each naming a tool of `NAME_BYTES` characters with a JSON-RPC
id as long; the replica's resident memory is read from /proc every 50 ms from before the flood until its last
export has arrived (the collector quiet for 10 s, 120 s at most), and an ordinary call is made after. Loopback only;
everything it starts it stops.
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import ExitStack
from typing import Any, Final

import anyio
import httpx2
from fleet import SHARED_KEYS, mcp_server
from report import answer_counts, before_and_after
from tracing import Collector

from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer

CALLS: Final = 100
AT_ONCE: Final = 10
NAME_BYTES: Final = 450_000  # the tool name's length, and the id's: 900 KB a body, under the 1 MiB cap
TOKEN: Final = "tok-trace-flooder"
RATE_LIMITS: Final = "standard=100000/30s,logs=100000/60s"
QUIET_SECONDS: Final = 10.0  # with nothing received: an export of a huge batch takes seconds to serialise
SETTLE_SECONDS: Final = 120.0
# What the SDK logs when a batch is lost: over the exporter's 64 MiB request cap, refused, or past the queue.
LOST: Final = ("Dropping span batch", "Failed to export", "Failed to encode", "Queue full")


def call(request_id: int | str, tool: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": {"name": tool, "arguments": {}}}).encode()


async def measure() -> dict[str, Any]:
    collector = Collector()
    with SandboxServer(SandboxConfig(tokens=(TOKEN,), seed=7)) as sandbox, ExitStack() as stack:
        stack.callback(collector.server.shutdown)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_AUTOMATION_", "CODEGEN_", "OTEL_"))}
        env |= {"AGENT_AUTOMATION_BASE_URL": sandbox.url, "AGENT_AUTOMATION_RATE_LIMITS": RATE_LIMITS, **SHARED_KEYS,
                "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_SERVICE_NAME": "trace-flood",
                "OTEL_TRACES_SAMPLER": "always_on"}
        replica = mcp_server("replica", env, "--auth", "request", "--log-level", "warning")
        stack.callback(replica.stop)
        headers = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json",
                   "accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
        url = f"{replica.url}/mcp"
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
            for n in range(5):  # the token checked, the code paths warm
                assert (await http.post(url, content=call(n, "list_models"))).status_code == 200
            await anyio.sleep(6)  # their spans exported: the batch processor sends every 5 s
            before = replica.memory_kib()["VmRSS"]
            exports_before, bytes_before = collector.exports, collector.bytes
            samples = [before]
            statuses: dict[int, int] = {}
            gate = anyio.Semaphore(AT_ONCE)
            huge = "x" * NAME_BYTES

            async def flooder(n: int) -> None:
                async with gate:
                    answer = await http.post(url, content=call(f"{n:06d}{'7' * (NAME_BYTES - 6)}", huge))
                    statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1

            started = time.monotonic()
            async with anyio.create_task_group() as group:
                for n in range(CALLS):
                    group.start_soon(flooder, n)

                async def sampler() -> None:
                    while True:
                        samples.append(replica.memory_kib()["VmRSS"])
                        await anyio.sleep(0.05)

                group.start_soon(sampler)
                while sum(statuses.values()) < CALLS:
                    await anyio.sleep(0.05)
                flood_seconds = time.monotonic() - started
                seen, quiet_since, give_up = collector.exports, time.monotonic(), time.monotonic() + SETTLE_SECONDS
                while time.monotonic() < give_up and time.monotonic() - quiet_since < QUIET_SECONDS:
                    await anyio.sleep(0.1)
                    if collector.exports != seen:
                        seen, quiet_since = collector.exports, time.monotonic()
                group.cancel_scope.cancel()
            after = replica.memory_kib()
            probe = (await http.post(url, content=call(999, "list_models"))).status_code
        stderr = replica.stderr_text()
        return {"rss_before_mib": before / 1024, "rss_peak_mib": max(samples) / 1024,
                "rss_after_mib": after["VmRSS"] / 1024, "hwm_mib": after["VmHWM"] / 1024, "statuses": statuses,
                "flood_seconds": round(flood_seconds, 1), "exports": collector.exports - exports_before,
                "export_kib": (collector.bytes - bytes_before) / 1024, "largest_export_kib": collector.largest / 1024,
                "batches_lost": sum(stderr.count(words) for words in LOST), "probe": probe, "load": os.getloadavg()[0]}


def render(rows: dict[str, Any], command: str) -> str:
    lines = ["## Traces: a flood of huge tool names and ids", "",
             f"Produced by `{command}`: one replica (`--auth request`) with traces on, every span sampled and exported "
             "over OTLP to a collector that counts and discards them; one tenant with a valid token sends "
             f"{CALLS} raw `tools/call` requests, {AT_ONCE} at a time, each naming a tool of {NAME_BYTES:,} "
             f"characters with a JSON-RPC id as long (900 KB a body, under the 1 MiB cap). The replica's resident "
             "memory (VmRSS) is read every 50 ms from before the flood until its last export has arrived (the "
             "collector quiet for 10 s); *peak* is the highest reading, the process's own high-water mark (VmHWM, "
             "since start) beside it. The Deployment's memory limit is 512 MiB. 2 shared cores; the load average is "
             "the 1-minute one at the end of the row.", "",
             "| code | answers | RSS before → peak (VmHWM) → after | exports received: count, total, largest | "
             "batches lost (the SDK's log) | an ordinary call after | load |",
             "|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
        answers = answer_counts(row["statuses"])
        lines.append(f"| {name} | {answers} | {row['rss_before_mib']:.0f} → {row['rss_peak_mib']:.0f} "
                     f"({row['hwm_mib']:.0f}) → {row['rss_after_mib']:.0f} MiB | {row['exports']}, "
                     f"{row['export_kib']:,.0f} KiB, {row['largest_export_kib']:,.0f} KiB | {row['batches_lost']} "
                     f"| {row['probe']} | {row['load']:.1f} |")
    return "\n".join([*lines, ""])


if __name__ == "__main__":
    sys.exit(before_and_after("trace_flood.py", __doc__.splitlines()[0], measure, render))
