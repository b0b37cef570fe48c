"""Following many runs as tasks: the service's reads per poll interval, and the delay of the token's own calls.

    .venv/bin/python benchmarks/following.py [--duration 60] [--runs 1,10,100] [--before SRC] [--write FILE]

For each count, a fresh sandbox (the service's published `standard` limit, 60 requests per 30 s; run creation
unbounded) and the server in process, as stdio serves one user: the count's runs are started as 2025-11-25 tasks,
then each task is polled with `tasks/get` at the `pollInterval` it was given, for `--duration` seconds, while the
same token calls `get_user` every 2 s, as a user would meanwhile. The sandbox's request log (`sandbox/recorder.py`)
counts the reads that can tell a run's status (`GET .../agent/run/{id}` and `GET .../agent/runs`). With `--before SRC`
(e.g. `git archive main src | tar -x -C /tmp/main`) the same runs on that tree's code, in a process of its own.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from report import before_and_after

sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))  # the task requester, after this folder's modules
from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.server import build_server
from task_requester import call_as_task, get_task

LIMITS = "agent_creation=100000/60s"  # starting the runs is not what is measured; `standard` stays the service's
INTERVAL = 5.0  # the server's poll interval: reads are counted per interval of it
OWN_CALL_EVERY = 2.0
STATUS_READS = ("get_agent_run", "list_agent_runs")


async def one_count(runs: int, duration: float) -> dict[str, Any]:
    config = SandboxConfig(run_seconds=3600, seed=7, rate_limits=parse_rate_limits(LIMITS))
    async with SandboxServer(config) as sandbox:
        api = ApiSettings(token=sandbox.token, org_id=sandbox.org_id, base_url=sandbox.url,
                          rate_limits=parse_rate_limits(LIMITS))
        async with Client(build_server(api, ServerSettings()), mode="legacy") as client:
            tasks = [(await call_as_task(client, "create_agent_run", {"prompt": f"Follow me {n}"}))["task"]
                     for n in range(runs)]
            await anyio.sleep(INTERVAL)  # what starting them read settles; the minute begins
            before = len(sandbox.request_log)
            delays: list[float] = []
            polls = 0
            deadline = time.monotonic() + duration

            async def follow(task: dict[str, Any], offset: float) -> None:
                nonlocal polls
                await anyio.sleep(offset)
                while time.monotonic() < deadline:
                    state = await get_task(client, task["taskId"])
                    polls += 1
                    wait = (state.model_extra or {}).get("pollInterval") or INTERVAL * 1000
                    await anyio.sleep(min(wait / 1000, max(0.0, deadline - time.monotonic())))

            async def own_calls() -> None:
                while time.monotonic() < deadline:
                    began = time.monotonic()
                    await client.call_tool("get_user", {})
                    delays.append(time.monotonic() - began)
                    await anyio.sleep(max(0.0, OWN_CALL_EVERY - (time.monotonic() - began)))

            async with anyio.create_task_group() as group:
                for index, task in enumerate(tasks):
                    group.start_soon(follow, task, INTERVAL * index / len(tasks))
                group.start_soon(own_calls)
            sent = [r.operation for r in list(sandbox.request_log)[before:]]
    reads = sum(1 for operation in sent if operation in STATUS_READS)
    return {"runs": runs, "polls": polls, "reads": reads, "per_interval": round(reads / (duration / INTERVAL), 2),
            "own_median_ms": round(statistics.median(delays) * 1000), "own_max_ms": round(max(delays) * 1000),
            "own_calls": len(delays)}


async def measure(counts: list[int], duration: float) -> list[dict[str, Any]]:
    return [await one_count(count, duration) for count in counts]


def render(columns: dict[str, list[dict[str, Any]]], command: str, duration: float, load: list[float]) -> str:
    lines = ["## Following many runs: one read per interval", "",
             f"Produced by `{command}` (2 cores shared with other work; 1-minute load average {load[0]:.1f} at the "
             f"start, {load[1]:.1f} at the end). For each count, the runs are started as tasks on one server (in "
             f"process, a fresh sandbox with the service's `standard` limit of 60 requests per 30 s), then every task "
             f"is polled with `tasks/get` at the interval it is given for {duration:g} s"
             f"{' (the minute scaled down: the machine is shared)' if duration < 60 else ''}, while the same token "
             "calls `get_user` every 2 s. *Reads* are the requests the sandbox received that can tell a run's "
             f"status (`GET .../agent/run/{{id}}`, `GET .../agent/runs`), per {INTERVAL:g} s interval; *own call* is "
             "how long each `get_user` took meanwhile.", "",
             "| runs followed | tree | polls | service reads | reads per interval | own call, median | own call, max |",
             "|---|---|---|---|---|---|---|"]
    for index in range(len(next(iter(columns.values())))):
        for name, rows in columns.items():
            row = rows[index]
            lines.append(f"| {row['runs']} | {name} | {row['polls']} | {row['reads']} | {row['per_interval']} | "
                         f"{row['own_median_ms']} ms | {row['own_max_ms']} ms |")
    lines += ["", "Before, each followed run was read on its own every interval: ten runs took most of the token's "
              "`standard` budget (100 of its 120 requests a minute) and a hundred more than all of it, so the pacer "
              "held the followers and the token's own calls waited behind them (seconds each). Now one read of the "
              "newest runs serves every followed run on it: one read per interval whatever the count, and the "
              "token's own calls are not delayed."]
    return "\n".join(lines) + "\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of following per count")
    parser.add_argument("--runs", default="1,10,100", help="counts of runs followed, comma-separated")


def main(argv: list[str] | None = None) -> int:
    own = argparse.ArgumentParser(add_help=False)  # this benchmark's options, before the measurement needs them
    add_arguments(own)
    args, _ = own.parse_known_args(argv)
    counts = [int(count) for count in args.runs.split(",")]
    load = os.getloadavg()[0]
    return before_and_after(
        "following.py", __doc__.splitlines()[0], partial(measure, counts, args.duration),
        lambda columns, command: render(columns, command, args.duration, [load, os.getloadavg()[0]]), argv,
        add_arguments, timeout=len(counts) * (args.duration + 200))


if __name__ == "__main__":
    raise SystemExit(main())
