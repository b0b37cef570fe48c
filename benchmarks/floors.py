"""Our cost beside the SDK's floors: the serving figures of issue 35, each a ratio to a bare MCP SDK server.

    .venv/bin/python benchmarks/floors.py [--before SRC] [--spawns 15] [--calls 100] [--call-rounds 7]
                                          [--rounds 5] [--duration 4] [--rate 0] [--parts startup,stdio,http]
                                          [--write docs/benchmarks.md]

The floors are the SDK alone (benchmarks/bare_server.py): **echo**, an `MCPServer` with one tool that echoes, and
the **forwarding floor**, an `MCPServer` whose tools make the same upstream GET as ours with one
`httpx2.AsyncClient` and return the service's JSON. Our server (this tree) and, with `--before SRC`, another tree's
code (e.g. `git archive main src | tar -x -C /tmp/before`, then `--before /tmp/before/src`) are measured beside
them in one run, taking turns, against one sandbox on loopback (limits far above the load: pacing never waits):

- **stdio start-up**: each subject spawned as a host spawns it (ours is `python -m agent_automation_mcp` with no
  token), the SDK's `Client` connected (2026-07-28), `tools/list` answered, the process stopped; one spawn of each
  subject per round, in an order that rotates. Wall time from spawn to the answer (the figure) and the process's
  CPU time from spawn to exit (the reaped child's `getrusage`).
- **stdio `get_agent_run`**: every subject's process open at once, one call in flight, the subjects taking turns
  call by call; a plain `httpx2` GET of the same URL takes its turn too (what the floor adds over the request
  itself). The p50 of each round (the figure) and the server process's CPU per call.
- **HTTP `tools/call`**: benchmarks/serving.py's rounds, 10 callers of `get_agent_run`, the server process's CPU
  per call, in both protocol eras. Back to back by default (the machine saturated, as the issue measured); with
  `--rate N` the callers offer N calls a second in all, below what every subject serves, so a subject's CPU per
  call is not inflated by waiting for a core the load generator and the sandbox also want.

Each ratio is the median over the rounds of the ratio within a round (subjects measured together), smallest and
largest in brackets: a burst of other work falls on the subjects of one round alike. Every process runs with
its bytecode cached (one unrecorded spawn of each first), as an installed package does.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, AsyncExitStack, ExitStack, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2
from fleet import cpu_seconds
from http_load import ERAS
from mcp import Client, StdioServerParameters
from report import command_line, publish
from serving import Row, Setup, set_up, start, take_turns
from startup import server as our_stdio_server
from startup import spawn_to_list
from tenants import ORG_ID

from remote import RATE_LIMITS

BARE = Path(__file__).with_name("bare_server.py")
PARTS = ("startup", "stdio", "http")
HTTP_CALLERS = 10
GOALS = {"stdio_call": 1.05, "startup": 1.15, "http_auto": 1.15, "http_legacy": 1.2}  # issue 35's
PATH_ONLY = {"PATH": "/usr/bin:/bin"}  # as a host spawns a server: none of the shell's settings


@dataclass
class Subject:
    """One server measured over rounds: a list of samples per round."""

    name: str
    samples: list[list[float]] = field(default_factory=list)  # seconds, per round
    cpu: list[float] = field(default_factory=list)  # CPU seconds per sample, per round
    errors: int = 0

    def median(self) -> float:
        return statistics.median(value for values in self.samples for value in values)

    def per_round(self) -> list[float]:
        return [statistics.median(values) for values in self.samples]


def ratios(mine: list[float], floor: list[float]) -> list[float]:
    return [a / b for a, b in zip(mine, floor, strict=True) if b]


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}× ({min(values):.2f}–{max(values):.2f})" if values else "—"


def rotated(names: list[str], turn: int) -> list[str]:
    return names[turn % len(names):] + names[:turn % len(names)]


def startup_subjects(before: Path | None) -> dict[str, StdioServerParameters]:
    subjects = {"floor": StdioServerParameters(command=sys.executable, args=[str(BARE), "--echo"], env=PATH_ONLY),
                "ours": our_stdio_server()}
    if before is not None:
        subjects["before"] = our_stdio_server(before)
    return subjects


async def measure_startup(subjects: dict[str, StdioServerParameters], spawns: int) -> dict[str, Subject]:
    """`spawns` rounds, each subject spawned once a round; wall seconds to `tools/list` and CPU seconds to exit."""
    found = {name: Subject(name) for name in subjects}
    for params in subjects.values():
        await spawn_to_list("auto", params)  # caches the bytecode and warms the file cache
    for turn in range(spawns):
        for name in rotated(list(subjects), turn):
            used = resource.getrusage(resource.RUSAGE_CHILDREN)
            elapsed, _ = await spawn_to_list("auto", subjects[name])
            after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the SDK's client has reaped it by now
            found[name].samples.append([elapsed])
            found[name].cpu.append(after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime)
        print(f"start-up round {turn + 1}: " + ", ".join(f"{n} {s.samples[-1][0] * 1000:.0f} ms "
                                                       f"({s.cpu[-1] * 1000:.0f} ms CPU)" for n, s in found.items())
              + f", load {os.getloadavg()[0]:.1f}", flush=True)
    return found


def call_subjects(setup: Setup, before: Path | None) -> dict[str, StdioServerParameters]:
    """The forwarding floor and our server over stdio, with the first tenant's token from the environment."""
    token = setup.fixtures[0].token
    settings = {"AGENT_AUTOMATION_API_TOKEN": token, "AGENT_AUTOMATION_BASE_URL": setup.sandbox.url,
                "AGENT_AUTOMATION_ORG_ID": str(ORG_ID), "AGENT_AUTOMATION_RATE_LIMITS": RATE_LIMITS}
    subjects = {"floor": StdioServerParameters(
        command=sys.executable, args=[str(BARE), "--transport", "stdio", "--base-url", setup.sandbox.url,
                                      "--org-id", str(ORG_ID)], env=PATH_ONLY | settings)}
    for name, source in (("ours", None), ("before", before)):
        if name == "ours" or source is not None:
            params = our_stdio_server(source)
            subjects[name] = StdioServerParameters(command=params.command, args=params.args,
                                                   env=(params.env or {}) | settings)
    return subjects


def children() -> set[int]:
    """This process's child processes, from /proc."""
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").glob("*"):
        try:
            found |= {int(pid) for pid in (task / "children").read_text().split()}
        except OSError:
            continue
    return found


async def measure_calls(setup: Setup, subjects: dict[str, StdioServerParameters], calls: int, rounds: int,
                        watch: Callable[[dict[str, int]], AbstractContextManager[object]] = nullcontext,
                        ) -> dict[str, Subject]:
    """Every subject open at once; `rounds` rounds of `calls` calls each, the subjects taking turns call by call.
    `watch` is given each server's process id and held over the rounds (a profiler)."""
    fixture = setup.fixtures[0]
    run_id = fixture.run_ids[0]
    found = {name: Subject(name) for name in [*subjects, "direct GET"]}
    async with AsyncExitStack() as stack:
        makers: dict[str, Callable[[], Awaitable[bool]]] = {}
        pids: dict[str, int] = {}
        for name, params in subjects.items():
            running = children()
            client = await stack.enter_async_context(Client(params, mode="auto"))
            (pids[name],) = children() - running

            async def call(client: Client = client) -> bool:
                result = await client.call_tool("get_agent_run", {"agent_run_id": run_id})
                return not result.is_error

            makers[name] = call
        http = await stack.enter_async_context(httpx2.AsyncClient(
            base_url=setup.sandbox.url, timeout=30, headers={"Authorization": f"Bearer {fixture.token}"}))

        async def direct() -> bool:
            response = await http.get(f"/v1/organizations/{ORG_ID}/agent/run/{run_id}")
            response.json()
            return response.is_success

        makers["direct GET"] = direct
        for make in makers.values():
            for _ in range(10):  # unrecorded: the first calls fill caches and connection pools
                await make()
        stack.enter_context(watch(pids))
        for turn in range(rounds):
            order = rotated(list(makers), turn)
            spent = {name: cpu_seconds(pid) for name, pid in pids.items()}
            times: dict[str, list[float]] = {name: [] for name in makers}
            for _ in range(calls):
                for name in order:
                    started = time.perf_counter()
                    succeeded = await makers[name]()
                    times[name].append(time.perf_counter() - started)
                    found[name].errors += not succeeded
            for name, subject in found.items():
                subject.samples.append(times[name])
                if name in pids:
                    subject.cpu.append((cpu_seconds(pids[name]) - spent[name]) / calls)
            print(f"stdio calls round {turn + 1}: " + ", ".join(
                f"{n} p50 {statistics.median(times[n]) * 1000:.2f} ms" for n in makers)
                + f", load {os.getloadavg()[0]:.1f}", flush=True)
    return found


def measure_http(stack: ExitStack, setup: Setup, before: Path | None, rounds: int, duration: float,
                 rate: float) -> list[Row]:
    targets = ["bare", "ours", *(["before"] if before else [])]
    servers = {}
    for target in targets:
        servers[target] = start(target, setup.env, before, False, setup.hidden)
        stack.callback(servers[target].stop)
    rows: list[Row] = []
    for mode in ("auto", "legacy"):
        cell = {target: Row(mode, "tools/call", HTTP_CALLERS, target) for target in targets}
        take_turns(setup, servers, cell, rounds, duration, 3, HTTP_CALLERS / rate if rate else 0.0)
        rows += cell.values()
    return rows


@dataclass
class Figures:
    """What each part found, and the 1-minute load average around it."""

    startup: dict[str, Subject] | None = None
    calls: dict[str, Subject] | None = None
    http: list[Row] | None = None
    http_rate: float = 0.0  # calls a second offered in all; 0: back to back
    loads: dict[str, tuple[float, float]] = field(default_factory=dict)  # part -> load average at start, end


LABELS = {"floor": "floor", "ours": "this tree", "before": "before"}


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms" if seconds < 0.1 else f"{seconds * 1000:.0f} ms"


def _row(figure: str, values: dict[str, float], per_round: dict[str, list[float]], names: list[str],
         goal: float | None = None) -> str:
    """A figure: its median per subject, each subject's ratio to the floor, and the goal if it has one."""
    cells = [figure, *(_ms(values[n]) if n in values else "—" for n in ["floor", *names])]
    cells += [spread(ratios(per_round[n], per_round["floor"])) if n in per_round else "—" for n in names]
    return "| " + " | ".join([*cells, *([f"≤ {goal:.2f}×"] if goal else [])]) + " |"


def _medians(subjects: dict[str, Subject]) -> tuple[dict[str, float], dict[str, list[float]]]:
    return {n: s.median() for n, s in subjects.items()}, {n: s.per_round() for n, s in subjects.items()}


def _cpu(subjects: dict[str, Subject]) -> tuple[dict[str, float], dict[str, list[float]]]:
    return {n: statistics.median(s.cpu) for n, s in subjects.items() if s.cpu}, \
        {n: s.cpu for n, s in subjects.items() if s.cpu}


def render(figures: Figures, names: list[str], command: str) -> str:
    head = ["figure", *(LABELS[n] for n in ["floor", *names]), *(f"{LABELS[n]} / floor" for n in names)]
    loads = "; ".join(f"{part} {start:.1f} → {end:.1f}" for part, (start, end) in figures.loads.items())
    lines = ["## Our cost beside the SDK's floors", "",
             f"Produced by `{command}` on loopback, {os.cpu_count()} cores shared with other work (1-minute load "
             f"average at the start and end of each part: {loads}). The floors: **echo** (an `MCPServer` with one "
             "tool that echoes) for the start-up, the **forwarding floor** (`benchmarks/bare_server.py`: the same "
             "upstream GET with one `httpx2.AsyncClient`, the service's JSON returned as it came) for the calls. "
             "A ratio is the median over the rounds of the ratio within a round (the subjects take turns), smallest "
             "and largest in brackets; each part is described in `benchmarks/floors.py`'s docstring.", "",
             "| " + " | ".join([*head, "goal"]) + " |", "|" + "---|" * (len(head) + 1)]
    also: list[str] = []
    notes: list[str] = []
    if figures.calls:
        calls = figures.calls
        lines.append(_row("stdio `get_agent_run` p50, beside the forwarding floor", *_medians(calls), names,
                          GOALS["stdio_call"]))
        also.append(_row("stdio `get_agent_run`: the server's CPU per call", *_cpu(calls), names))
        direct, floor = calls["direct GET"].median(), calls["floor"].median()
        notes.append(f"- stdio: {sum(len(v) for v in calls['floor'].samples)} calls per subject; a direct GET of "
                     f"the same URL (no MCP) took {_ms(direct)} at p50, so the floor adds {_ms(floor - direct)} "
                     "over the request itself; failed calls: "
                     + ", ".join(f"{LABELS.get(n, n)} {s.errors}" for n, s in calls.items()) + ".")
    if figures.startup:
        lines.append(_row("stdio spawn → `tools/list`, beside the echo floor", *_medians(figures.startup), names,
                          GOALS["startup"]))
        also.append(_row("stdio start-up: the process's CPU from spawn to exit", *_cpu(figures.startup), names))
    if figures.http:
        by = {(r.mode, "floor" if r.target == "bare" else r.target): r for r in figures.http}
        for mode, era in (("auto", "2026-07-28"), ("legacy", "2025-11-25")):
            found = {name: row for (m, name), row in by.items() if m == mode}
            lines.append(_row(f"HTTP `tools/call` CPU per call, beside the forwarding floor, {era}",
                              {n: r.cpu_ms / 1000 for n, r in found.items()},
                              {n: r.cpu_per_round for n, r in found.items()}, names, GOALS[f"http_{mode}"]))
        offered = f"{figures.http_rate:g} calls/s offered" if figures.http_rate else "back to back"
        notes.append(f"- HTTP: {HTTP_CALLERS} callers ({offered}), {len(figures.http[0].loads)} rounds per era; "
                     "calls/s "
                     + ", ".join(f"{ERAS[r.mode]} {LABELS['floor' if r.target == 'bare' else r.target]} "
                                 f"{r.rate:.0f}" for r in figures.http)
                     + f"; errors {sum(r.errors for r in figures.http)}.")
    if also:
        lines += ["", "Also measured in the same rounds:", "", "| " + " | ".join(head) + " |",
                  "|" + "---|" * len(head), *also]
    return "\n".join([*lines, "", *notes]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a source tree (its src/) of our server to measure as well")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated: {', '.join(PARTS)}")
    parser.add_argument("--spawns", type=int, default=15, help="start-up rounds, each subject spawned once a round")
    parser.add_argument("--calls", type=int, default=100, help="stdio calls per subject per round")
    parser.add_argument("--call-rounds", type=int, default=7, help="stdio call rounds")
    parser.add_argument("--rounds", type=int, default=5, help="HTTP rounds per era, the servers taking turns")
    parser.add_argument("--duration", type=float, default=4.0, help="seconds of HTTP load per round")
    parser.add_argument("--rate", type=float, default=0.0, help="HTTP calls per second offered in all (0: each "
                        "caller calls back to back, the machine saturated)")
    parser.add_argument("--write", type=Path, help="write the section into this report (e.g. docs/benchmarks.md)")
    args = parser.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    if set(parts) - set(PARTS) or not 1 <= args.spawns <= 100 or not 1 <= args.calls <= 2000 \
            or not 1 <= args.call_rounds <= 50 or not 1 <= args.rounds <= 20 or not 0 < args.duration <= 60 \
            or not 0 <= args.rate <= 2000 \
            or (args.before is not None and not (args.before / "agent_automation_mcp").is_dir()):
        parser.error(f"parts among {', '.join(PARTS)}; spawns 1-100, calls 1-2000, call rounds 1-50, rounds 1-20, "
                     "duration up to 60 s, rate 0-2000; --before a src/ holding the package")
    names = ["ours", *(["before"] if args.before else [])]
    figures = Figures()
    with ExitStack() as stack:
        setup = set_up(stack, HTTP_CALLERS)
        for part in parts:
            load = os.getloadavg()[0]
            if part == "startup":
                figures.startup = anyio.run(measure_startup, startup_subjects(args.before), args.spawns)
            elif part == "stdio":
                figures.calls = anyio.run(measure_calls, setup, call_subjects(setup, args.before), args.calls,
                                          args.call_rounds)
            else:
                figures.http = measure_http(stack, setup, args.before, args.rounds, args.duration, args.rate)
                figures.http_rate = args.rate
            figures.loads[part] = (load, os.getloadavg()[0])
    publish(render(figures, names, command_line("floors.py", argv)), args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
