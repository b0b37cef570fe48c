"""Startup benchmark: spawn the server over stdio as an MCP host does, until `tools/list` has answered.

    .venv/bin/python benchmarks/startup.py [--runs 11] [--write docs/benchmarks.md]

Each run starts `python -m agent_automation_mcp` with no token (the server must still list its tools), connects
the SDK's `Client` over stdio in one protocol era, lists the tools and stops the process. No network at all.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from report import command_line, publish

ERAS = {"auto": "2026-07-28", "legacy": "2025-11-25 handshake"}


def server(source: Path | None = None) -> StdioServerParameters:
    """Our server; `source`: another tree's src/, whose code it runs instead of this one's."""
    env = {"PATH": "/usr/bin:/bin"}  # none of our settings: no token, so no network either
    if source is not None:
        env["PYTHONPATH"] = str(source)
    return StdioServerParameters(command=sys.executable, args=["-m", "agent_automation_mcp"], env=env)


async def spawn_to_list(mode: str, params: StdioServerParameters | None = None) -> tuple[float, int]:
    """Seconds from spawning the process to the `tools/list` answer, and that answer's size in characters."""
    started = time.perf_counter()
    async with Client(params or server(), mode=mode) as client:
        tools = await client.list_tools()
        elapsed = time.perf_counter() - started
    payload = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools.tools]
    return elapsed, len(json.dumps({"tools": payload}, separators=(",", ":"), ensure_ascii=False))


async def measure(runs: int) -> dict[str, tuple[list[float], int]]:
    results: dict[str, tuple[list[float], int]] = {}
    for mode in ERAS:
        await spawn_to_list(mode)  # warm the file cache: the first spawn after an install reads every module
        times, size = [], 0
        for _ in range(runs):
            elapsed, size = await spawn_to_list(mode)
            times.append(elapsed)
        results[mode] = times, size
    return results


def render(results: dict[str, tuple[list[float], int]], command: str) -> str:
    lines = [
        "## Startup", "",
        f"Produced by `{command}` (2 cores): `python -m agent_automation_mcp` spawned over stdio with no token, "
        "the SDK's `Client` connected, `tools/list` answered, the process stopped; one warm-up spawn per era "
        "first. The size is the default toolsets' `tools/list` payload, compact JSON, and tokens are chars / 4.", "",
        "| protocol era | runs | spawn to tools/list: median | p90 | min / max | tools/list |",
        "|---|---|---|---|---|---|",
    ]
    for mode, (times, size) in results.items():
        p90 = statistics.quantiles(times, n=10, method="inclusive")[-1]
        lines.append(f"| {ERAS[mode]} | {len(times)} | {statistics.median(times) * 1000:.0f} ms | "
                     f"{p90 * 1000:.0f} ms | {min(times) * 1000:.0f} / {max(times) * 1000:.0f} ms | "
                     f"{size:,} chars ≈ {size // 4:,} tokens |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11, choices=range(2, 101), metavar="2..100",
                        help="spawns per protocol era")
    parser.add_argument("--write", type=Path, help="write the section into this report (e.g. docs/benchmarks.md)")
    args = parser.parse_args(argv)
    publish(render(anyio.run(measure, args.runs), command_line("startup.py", argv)), args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
