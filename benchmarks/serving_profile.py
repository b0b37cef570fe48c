"""Where a server's CPU goes per HTTP call: py-spy on the server process under the serving benchmark's load.

    .venv/bin/python benchmarks/serving_profile.py [--target ours|bare] [--src DIR] [--hide-httptools]
                                                   [--method tools/call] [--mode auto] [--concurrency 10]
                                                   [--duration 20] [--rate 250]

One sandbox, one server (ours, `--src` puts another source tree ahead of the installed package; or the bare SDK
server) and the load process of benchmarks/serving.py; py-spy (from PyPI; idle threads left out, so a sample is
the server running Python; `--nonblocking`: pausing the server for each sample added a third to its CPU per call)
samples the server process alone while the load calls. Some stacks come out without their outermost frames;
their innermost ones, which these counts use, are whole. Each sample counts towards the component of the frame
it was running (or the upstream request, wherever that is on the stack), and towards the deepest of our
functions on its stack, which is ours to answer for with the library calls it made; with the server's CPU time
per call from the same window, a share is also microseconds per call. `--hide-httptools` makes `import
httptools` fail in the server (uvicorn then parses with h11, as it did before httptools was a dependency).
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
from pathlib import Path

from fleet import ServerProcess, bare_server, mcp_server, without_httptools
from http_load import ERAS, Call, LoadJob, LoadResult, Method, Tenant, run_load_process
from tenants import ORG_ID, create_fixtures, lay_out_tokens

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from remote import RATE_LIMITS

PY_SPY = Path(sys.executable).with_name("py-spy")
# (component, pattern on a frame's file): the first match names the frame's component.
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("ours: HTTP gate, Host/Origin, headers", r"agent_automation_mcp/(remote/|headers\.py)"),
    ("ours: tool call, arguments, results", r"agent_automation_mcp/(server\.py|tools/)"),
    ("ours: API client, credentials, transport, pacing", r"agent_automation_mcp/(api/|pacing/|caching\.py)"),
    ("ours: other", r"agent_automation_mcp/"),
    ("HTTP parsing (uvicorn protocol, h11, httptools)", r"uvicorn/protocols/|/h11/|httptools"),
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
FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def component(frames: list[tuple[str, str]]) -> str:
    """The upstream request's client wherever it is on the stack (its socket calls run in anyio's frames), else
    what the running frame belongs to."""
    if any(UPSTREAM_FILES.search(file) for _, file in frames):
        return UPSTREAM
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


def summarise(stacks: list[tuple[list[tuple[str, str]], int]], cpu_us: float, top: int) -> str:
    total = sum(count for _, count in stacks)
    self_time: Counter[str] = Counter()
    under: Counter[str] = Counter()
    for frames, count in stacks:
        self_time[component(frames)] += count
        deepest = next((f"`{function}` ({module})" for function, file in reversed(frames)
                        if (module := ours(file)) is not None), "(none of ours on the stack)")
        under[deepest] += count
    lines = [f"{total} samples; {cpu_us:.0f} µs of server CPU per call in the window", "",
             "| component (the frame running; the upstream request's whole stack) | share | µs per call |",
             "|---|---|---|"]
    lines += [f"| {name} | {count / total:.1%} | {count / total * cpu_us:.0f} |"
              for name, count in self_time.most_common()]
    lines += ["", "| the deepest of our functions on the stack (it and the libraries it called) | share | µs per call "
              "|", "|---|---|---|"]
    lines += [f"| {name} | {count / total:.1%} | {count / total * cpu_us:.0f} |"
              for name, count in under.most_common(top)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=("ours", "bare"), default="ours")
    parser.add_argument("--src", type=Path, help="a source tree (its src/) of our server to run instead")
    parser.add_argument("--hide-httptools", action="store_true", help="the server parses HTTP with h11")
    parser.add_argument("--method", choices=("tools/call", "tools/list"), default="tools/call")
    parser.add_argument("--mode", choices=tuple(ERAS), default="auto")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds sampled")
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    parser.add_argument("--top", type=int, default=25, help="our functions listed")
    parser.add_argument("--raw", type=Path, help="also keep py-spy's raw stacks in this file")
    args = parser.parse_args(argv)
    if not 1 <= args.concurrency <= 200 or not 1 <= args.duration <= 120 or not 10 <= args.rate <= 1000:
        parser.error("concurrency 1-200, duration 1-120 s, rate 10-1000 Hz")
    tokens, users = lay_out_tokens(args.concurrency)
    config = SandboxConfig(tokens=tokens, rate_limits=parse_rate_limits(RATE_LIMITS), seed=15, org_id=ORG_ID)
    with ExitStack() as stack:
        sandbox = stack.enter_context(SandboxServer(config))
        fixtures = create_fixtures(sandbox, users)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_AUTOMATION_", "CODEGEN_"))}
        env |= {"AGENT_AUTOMATION_BASE_URL": sandbox.url, "AGENT_AUTOMATION_RATE_LIMITS": RATE_LIMITS}
        if args.src is not None:
            env["PYTHONPATH"] = str(args.src)
        if args.hide_httptools:
            env = without_httptools(env, Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="no-httptools-"))))
        server: ServerProcess = (bare_server(env, sandbox.url, ORG_ID) if args.target == "bare"
                                 else mcp_server("profiled", env, "--auth", "request"))
        stack.callback(server.stop)
        method: Method = args.method
        tenants = tuple(Tenant({"Authorization": f"Bearer {f.token}", "X-Organization-Id": str(ORG_ID)},
                               (Call(method, "get_agent_run", {"agent_run_id": f.run_ids[0]})
                                if method == "tools/call" else Call(method),))
                        for f in fixtures[:args.concurrency])
        settle = 5.0  # seconds for the load to connect and warm up before sampling starts
        job = LoadJob(f"{server.url}/mcp", args.mode, tenants, args.duration + settle, 3,
                      server_pids=(server.process.pid,))
        results: list[LoadResult] = []
        load = threading.Thread(target=lambda: results.append(run_load_process(job)))
        load.start()
        time.sleep(settle)
        out = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="py-spy-"))) / "profile.txt"
        subprocess.run([str(PY_SPY), "record", "--nonblocking", "--full-filenames", "--format", "raw", "--rate",
                        str(args.rate), "--duration", str(int(args.duration)), "--output", str(out), "--pid",
                        str(server.process.pid)], check=True, capture_output=True, timeout=args.duration + 60)
        load.join(timeout=args.duration + 300)
        result = results[0]
        cpu_us = result.server_cpu / result.in_window * 1e6 if result.in_window else 0.0
        print(f"{args.target}{' ' + str(args.src) if args.src else ''}{' (h11)' if args.hide_httptools else ''}, "
              f"{ERAS[args.mode]} {method} c={args.concurrency}: {result.rate:.0f} calls/s, errors "
              f"{result.error_count}, load average {os.getloadavg()[0]:.1f}")
        raw = out.read_text()
        if args.raw is not None:
            args.raw.write_text(raw)
        print(summarise(parse(raw), cpu_us, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
