"""Work per call, counted: the function calls each server makes to answer one `get_agent_run`, beside the floor.

    .venv/bin/python benchmarks/call_counts.py [--before SRC] [--calls 200] [--write docs/benchmarks.md]

The subjects of benchmarks/floors.py (the forwarding floor, this tree and, with `--before SRC`, another tree's code)
each run under `python -m cProfile`, over stdio and over HTTP in both protocol eras (`--auth request`), against one
sandbox on loopback: once for `--calls` calls and once for twice as many, one after another from one client, so the
difference is `--calls` calls whatever the start-up and shutdown cost. A count is every Python function and built-in
called per call, as cProfile counts them. Unlike CPU time it does not move with the machine's load, so it tells one
tree's per-call work from another's on a shared machine; it does not weigh a call (a pydantic-core validation counts
one, as `len` does), so CPU per call (benchmarks/floors.py) stays the figure the goals are about.
"""

from __future__ import annotations

import argparse
import os
import pstats
import signal
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

import anyio
import httpx2
from fleet import ServerProcess, free_port
from floors import BARE, call_subjects
from http_load import ERAS
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from report import command_line, publish
from serving import Setup, set_up
from tenants import ORG_ID

TRANSPORTS = ("stdio", *ERAS)  # stdio, then HTTP in each era (Client mode)
SUBJECTS = {"floor": "floor", "ours": "this tree", "before": "before"}


def _calls(profile: Path) -> int:
    return sum(calls for _, calls, _, _, _ in pstats.Stats(str(profile)).stats.values())  # type: ignore[attr-defined]


async def _call(client: Client, run_id: int, calls: int) -> None:
    for _ in range(calls):
        result = await client.call_tool("get_agent_run", {"agent_run_id": run_id})
        if result.is_error:
            raise RuntimeError(f"get_agent_run failed: {result.content[0]}")


async def _over_stdio(params: StdioServerParameters, profile: Path, run_id: int, calls: int) -> None:
    profiled = StdioServerParameters(command=params.command, args=["-m", "cProfile", "-o", str(profile), *params.args],
                                     env=params.env)
    async with Client(profiled, mode="auto") as client:  # its input ends on leaving: the server exits, cProfile writes
        await _call(client, run_id, calls)


def _over_http(setup: Setup, subject: str, before: Path | None, era: str, profile: Path, calls: int) -> None:
    port = free_port()
    fixture = setup.fixtures[0]
    profiled = [sys.executable, "-m", "cProfile", "-o", str(profile)]
    if subject == "floor":
        command = [*profiled, str(BARE), "--port", str(port), "--base-url", setup.sandbox.url, "--org-id", str(ORG_ID)]
        env = setup.env
    else:
        command = [*profiled, "-m", "agent_automation_mcp", "serve", "--transport", "http", "--port", str(port),
                   "--auth", "request"]
        env = setup.env | ({"PYTHONPATH": str(before)} if subject == "before" and before is not None else {})
    server = ServerProcess(subject, command, port, env)
    try:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {fixture.token}",
                                           "X-Organization-Id": str(ORG_ID)}, timeout=30)

        async def call() -> None:
            async with Client(streamable_http_client(f"{server.url}/mcp", http_client=http), mode=era) as client:
                await _call(client, fixture.run_ids[0], calls)

        anyio.run(call)
    finally:
        server.process.send_signal(signal.SIGINT)  # uvicorn stops and raises it again: cProfile writes on the way out
        server.process.wait(timeout=30)
        server.stop()


def measure(before: Path | None, calls: int) -> dict[str, dict[str, float]]:
    """Calls per `get_agent_run`, by transport (stdio or an HTTP era) and subject."""
    found: dict[str, dict[str, float]] = {transport: {} for transport in TRANSPORTS}
    with ExitStack() as stack:
        setup = set_up(stack, 1)
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="call-counts-")))
        stdio = call_subjects(setup, before)
        subjects = [name for name in SUBJECTS if name != "before" or before is not None]
        for transport in TRANSPORTS:
            for subject in subjects:
                counts = []
                for n in (calls, 2 * calls):
                    profile = folder / f"{transport}-{subject}-{n}.prof"
                    if transport == "stdio":
                        anyio.run(_over_stdio, stdio[subject], profile, setup.fixtures[0].run_ids[0], n)
                    else:
                        _over_http(setup, subject, before, transport, profile, n)
                    counts.append(_calls(profile))
                found[transport][subject] = (counts[1] - counts[0]) / calls
                print(f"{transport} {subject}: {found[transport][subject]:,.0f} calls per call", flush=True)
    return found


def render(found: dict[str, dict[str, float]], command: str, calls: int) -> str:
    names = [name for name in SUBJECTS if name in found["stdio"]]
    lines = ["## Work per call, counted", "",
             f"Produced by `{command}`: each server under cProfile answering {calls:,} and then {2 * calls:,} "
             "`get_agent_run` calls from one client (the difference is per call, whatever the start-up), over stdio "
             "and over HTTP (`--auth request`) in both eras; the floor is the forwarding floor of the section above. "
             "A count is every Python function and built-in called per call; it does not move with the load (1-minute "
             f"load average {os.getloadavg()[0]:.1f}) and does not weigh a call, so it tells trees apart where CPU "
             "time on a shared machine cannot, and CPU per call stays the figure the goals are about.", "",
             "| transport | " + " | ".join(SUBJECTS[name] for name in names) + " | this tree / floor |",
             "|---|" + "---|" * (len(names) + 1)]
    for transport in TRANSPORTS:
        row = found[transport]
        where = "stdio" if transport == "stdio" else f"HTTP, {ERAS[transport]}"
        lines.append(f"| {where} | " + " | ".join(f"{row[name]:,.0f}" for name in names)
                     + f" | {row['ours'] / row['floor']:.2f}× |")
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a source tree (its src/) of our server to count as well")
    parser.add_argument("--calls", type=int, default=200, help="calls in the shorter of each subject's two runs")
    parser.add_argument("--write", type=Path, help="write the section into this report (e.g. docs/benchmarks.md)")
    args = parser.parse_args(argv)
    publish(render(measure(args.before, args.calls), command_line("call_counts.py", argv), args.calls), args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
