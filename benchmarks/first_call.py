"""The first `get_agent_run` of a fresh stdio server, beside the forwarding floor: what a start-up left for later.

    .venv/bin/python benchmarks/first_call.py [--before SRC] [--spawns 10]

Each subject (benchmarks/floors.py's call subjects: the forwarding floor, this tree, `--before` another tree's code)
is spawned as a host spawns it, with a token, against one sandbox on loopback; the SDK's `Client` connects and lists
the tools (timed from the spawn: with a token our `initialize` reads the token's organisations from the service, for
the instructions), then calls `get_agent_run` three times on one run. The first call pays whatever the server left
undone at start (models and validators built when first used, the first connection to the service); the third is a
call as every later one. One spawn of each subject per round, in an order that rotates; every process runs with its
bytecode cached (one unrecorded spawn of each first).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import anyio
from floors import call_subjects, rotated
from mcp import Client, StdioServerParameters
from serving import set_up

CALLS = 3


async def calls_after_start(params: StdioServerParameters, run_id: int) -> list[float]:
    """Seconds from the spawn to the tools listed, as a host lists them, then of each call."""
    started = time.perf_counter()
    async with Client(params, mode="auto") as client:
        await client.list_tools()
        times = [time.perf_counter() - started]
        for _ in range(CALLS):
            started = time.perf_counter()
            result = await client.call_tool("get_agent_run", {"agent_run_id": run_id})
            times.append(time.perf_counter() - started)
            if result.is_error:
                raise RuntimeError(f"get_agent_run failed: {result.content}")
    return times


async def measure(subjects: dict[str, StdioServerParameters], run_id: int, spawns: int) -> dict[str, list[list[float]]]:
    for params in subjects.values():
        await calls_after_start(params, run_id)  # caches the bytecode
    found: dict[str, list[list[float]]] = {name: [] for name in subjects}
    for turn in range(spawns):
        for name in rotated(list(subjects), turn):
            found[name].append(await calls_after_start(subjects[name], run_id))
        said = [f"{name} {listed * 1000:.0f} ms, {first * 1000:.1f} / {third * 1000:.1f} ms"
                for name, (listed, first, *_, third) in ((name, found[name][-1]) for name in subjects)]
        print(f"round {turn + 1}: {', '.join(said)}, load {os.getloadavg()[0]:.1f}", flush=True)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="another tree's src/, measured beside this one")
    parser.add_argument("--spawns", type=int, default=10)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with ExitStack() as stack:
        setup = set_up(stack, 1)
        found = anyio.run(measure, call_subjects(setup, args.before), setup.fixtures[0].run_ids[0], args.spawns)
    print(f"\na stdio start with a token, then the first and third get_agent_run, median of {args.spawns} spawns (load "
          f"average {load:.1f} → {os.getloadavg()[0]:.1f}):\n\n"
          "| subject | spawn → tools/list | first call | third call |\n|---|---|---|---|")
    for name, spawns in found.items():
        listed, first, third = (statistics.median(times[i] for times in spawns) * 1000 for i in (0, 1, -1))
        print(f"| {name} | {listed:.0f} ms | {first:.1f} ms | {third:.1f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
