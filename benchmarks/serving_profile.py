"""Where a server's CPU goes per HTTP call: py-spy on the server process under the serving benchmark's load.

    .venv/bin/python benchmarks/serving_profile.py [--targets ours,before,bare] [--before SRC]
                                                   [--method tools/call] [--mode auto] [--concurrency 10]
                                                   [--duration 20] [--rate 250] [--offered 0]

One sandbox and, one after the other, each target of benchmarks/serving.py named (the same servers: `before` is
the `--before` tree) under that benchmark's load process; py-spy (from PyPI; idle threads left out, so a
sample is the server running Python; `--nonblocking`: pausing the server for each sample added a third to its
CPU per call) samples the server process alone while the load calls. Some stacks come out without their
outermost frames; their innermost ones, which these counts use, are whole. Each sample counts towards the
component of the frame it was running (or the upstream request, wherever that is on the stack), and towards the
deepest of our functions on its stack, which is ours to answer for with the library calls it made; with the
server's CPU time per call from the same window, a share is also microseconds per call.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from fleet import ServerProcess
from http_load import ERAS, LoadJob, LoadResult, Method, run_load_process
from report import command_line
from serving import TARGETS, callers, set_up, start

PY_SPY = Path(sys.executable).with_name("py-spy")
PROFILED = ("ours", "before", "bare", "ours-h11", "bare-h11")  # one process each (Granian serves from a worker)
SETTLE = 5.0  # seconds for the load to connect and warm up before sampling starts
# (component, pattern on a frame's file): the first match names the frame's component.
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("ours: HTTP gate, Host/Origin, headers", r"agent_automation_mcp/(remote/|headers\.py)"),
    ("ours: tool call, arguments, results", r"agent_automation_mcp/(server\.py|tools/)"),
    ("ours: API client, credentials, transport, pacing", r"agent_automation_mcp/(api/|pacing/|caching\.py)"),
    ("ours: other", r"agent_automation_mcp/"),
    ("HTTP parsing and uvicorn's protocol (h11 or httptools)", r"uvicorn/protocols/|/h11/|httptools"),
    ("uvicorn, other", r"/uvicorn/"),
    ("event loop (asyncio, uvloop)", r"/asyncio/|uvloop"),
    ("anyio", r"/anyio/"),
    ("Starlette", r"/starlette/|sse_starlette"),
    ("MCP SDK: Streamable HTTP transport", r"mcp/server/streamable_http|mcp/server/transport|mcp/shared/message"),
    ("MCP SDK: session, dispatch, tool machinery", r"/mcp(_types)?/"),
    ("pydantic (validation, serialisation)", r"/pydantic(_core)?/"),
    ("json", r"/json/"),
    ("logging", r"/logging/"),
    ("other", r""),
)
UPSTREAM = "the upstream request (httpx2, httpcore2 and its socket writes and reads)"
UPSTREAM_FILES = re.compile(r"/httpx2/|/httpcore")
SENDING = "uvicorn sending the answer (its bytes, the socket write)"
FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def component(frames: list[tuple[str, str]]) -> str:
    """The upstream request's client wherever it is on the stack (its socket calls run in anyio's frames), else
    what the running frame belongs to, with uvicorn's sending apart from its parsing."""
    if any(UPSTREAM_FILES.search(file) for _, file in frames):
        return UPSTREAM
    function, file = frames[-1]
    if function == "RequestResponseCycle.send" and "uvicorn/protocols/" in file:
        return SENDING  # mostly `transport.write`, which uvloop sends at once: kernel time, whatever the parser
    return next(name for name, pattern in COMPONENTS if re.search(pattern, frames[-1][1]))


def parse(raw: str) -> list[tuple[list[tuple[str, str]], int]]:
    """py-spy's raw output: one `frame;frame;...;leaf count` line per distinct stack, root first."""
    stacks = []
    for line in raw.splitlines():
        text, _, count = line.rpartition(" ")
        if not text or not count.isdigit():
            continue
        frames = []
        for part in text.split(";"):
            match = FRAME.match(part)
            if match:
                frames.append((match["function"], match["file"]))
        if frames:
            stacks.append((frames, int(count)))
    return stacks


def ours(file: str) -> str | None:
    """`module.py` within our package, or None for any other file."""
    _, found, rest = file.partition("agent_automation_mcp/")
    return rest if found else None


@dataclass
class Profile:
    """One target's samples and, from the same window, its CPU time per call."""

    target: str
    stacks: list[tuple[list[tuple[str, str]], int]]
    cpu_us: float
    rate: float
    errors: int
    loadavg: float

    @property
    def samples(self) -> int:
        return sum(count for _, count in self.stacks)

    def components(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for frames, count in self.stacks:
            counts[component(frames)] += count
        return counts

    def deepest_ours(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for frames, count in self.stacks:
            counts[next((f"`{function}` ({module})" for function, file in reversed(frames)
                         if (module := ours(file)) is not None), "(none of ours on the stack)")] += count
        return counts

    def us(self, count: int) -> float:
        return count / self.samples * self.cpu_us if self.samples else 0.0


def summarise(profiles: list[Profile], top: int) -> str:
    """One table of components with a column per target, then each of our targets' own functions."""
    lines = [f"- **{TARGETS[p.target]}**: {p.samples} samples, {p.cpu_us:.0f} µs of server CPU per call, "
             f"{p.rate:.0f} calls/s, {p.errors} errors, load average {p.loadavg:.1f}" for p in profiles]
    counts = [p.components() for p in profiles]
    names = sorted(set().union(*counts), key=lambda n: -max(p.us(c[n]) for p, c in zip(profiles, counts, strict=True)))
    lines += ["", "| component | " + " | ".join(f"{TARGETS[p.target]}: µs per call (share)" for p in profiles) + " |",
              "|---|" + "---|" * len(profiles)]
    lines += [f"| {name} | " + " | ".join(f"{p.us(c[name]):.0f} ({c[name] / p.samples:.0%})"
                                         for p, c in zip(profiles, counts, strict=True)) + " |" for name in names]
    lines.append("| **all but the upstream request** | " + " | ".join(
        f"**{p.cpu_us - p.us(c[UPSTREAM]):.0f}**" for p, c in zip(profiles, counts, strict=True)) + " |")
    for profile in profiles:
        if profile.target.startswith("bare"):
            continue
        lines += ["", f"{TARGETS[profile.target]}: the deepest of our functions on the stack (it and the library "
                  "calls it made)", "", "| function | µs per call (share) |", "|---|---|"]
        lines += [f"| {name} | {profile.us(count):.0f} ({count / profile.samples:.1%}) |"
                  for name, count in profile.deepest_ours().most_common(top)]
    return "\n".join(lines)


def profile(target: str, server: ServerProcess, job: LoadJob, duration: float, rate: int, raw: Path | None) -> Profile:
    """Sample `server` while the load runs, from when the load has connected and warmed up."""
    results: list[LoadResult] = []
    load = threading.Thread(target=lambda: results.append(run_load_process(job)))
    load.start()
    time.sleep(SETTLE)
    with tempfile.TemporaryDirectory(prefix="py-spy-") as folder:
        out = Path(folder) / "profile.txt"
        subprocess.run([str(PY_SPY), "record", "--nonblocking", "--full-filenames", "--format", "raw", "--rate",
                        str(rate), "--duration", str(int(duration)), "--output", str(out), "--pid",
                        str(server.process.pid)], check=True, capture_output=True, timeout=duration + 60)
        text = out.read_text()
    load.join(timeout=duration + 300)
    if raw is not None:
        raw.with_name(f"{raw.name}.{target}").write_text(text)
    result = results[0]
    return Profile(target, parse(text), result.server_cpu / result.in_window * 1e6 if result.in_window else 0.0,
                   result.rate, result.error_count + result.connect_failures, os.getloadavg()[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="ours,bare", help=f"comma-separated, in turn: {', '.join(PROFILED)}")
    parser.add_argument("--before", type=Path, help="a source tree (its src/) of our server, the `before` target")
    parser.add_argument("--method", choices=("tools/call", "tools/list"), default="tools/call")
    parser.add_argument("--mode", choices=tuple(ERAS), default="auto")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds sampled per target")
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    parser.add_argument("--offered", type=float, default=0.0, help="calls a second offered in all, as benchmarks/"
                        "floors.py's --rate (0: back to back, the machine saturated)")
    parser.add_argument("--top", type=int, default=15, help="our functions listed")
    parser.add_argument("--raw", type=Path, help="also keep py-spy's raw stacks, in PATH.<target>")
    args = parser.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    if not 1 <= args.concurrency <= 200 or not 1 <= args.duration <= 120 or not 10 <= args.rate <= 1000 \
            or not targets or set(targets) - set(PROFILED) or ("before" in targets and args.before is None):
        parser.error(f"concurrency 1-200, duration 1-120 s, rate 10-1000 Hz, targets among {', '.join(PROFILED)} "
                     "(before needs --before)")
    profiles = []
    with ExitStack() as stack:
        setup = set_up(stack, args.concurrency)
        method: Method = args.method
        tenants = tuple(callers(setup.fixtures, method, args.concurrency))
        for target in targets:
            server = start(target, setup.env, args.before, method == "tools/list", setup.hidden)
            try:
                job = LoadJob(f"{server.url}/mcp", args.mode, tenants, args.duration + SETTLE, 3,
                              args.concurrency / args.offered if args.offered else 0.0,
                              server_pids=(server.process.pid,))
                profiles.append(profile(target, server, job, args.duration, args.rate, args.raw))
            finally:
                server.stop()
            setup.sandbox.state.limiter.reset()
    print(f"{ERAS[args.mode]} `{method}`, {args.concurrency} callers, {args.duration:g} s at {args.rate} Hz per "
          f"target ({command_line('serving_profile.py', argv)})\n")
    print(summarise(profiles, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
