"""Serving cost over HTTP: our server's `tools/call` and `tools/list` rates against the SDK's bare server's.

    .venv/bin/python benchmarks/serving.py [--duration 5] [--concurrency 1,10,50] [--modes auto,legacy]
                                           [--before SRC] [--targets bare,ours,...] [--write docs/benchmarks.md]

One sandbox (limits far above the load, so pacing never waits), our server (`serve --transport http --auth
request`), the SDK's bare server (benchmarks/bare_server.py, on the same event loop and HTTP parser) and, with
`--before SRC`, our server again from another source tree (e.g. `git worktree add /tmp/before COMMIT`, then
`--before /tmp/before/src`), on the same HTTP stack as ours; `--targets` adds our server on h11 (`ours-h11`)
and the bare server on h11 or Granian (`bare-h11`, `bare-granian`), all started in this run. A separate load
process (benchmarks/http_load.py) runs C tenants, each its own token and SDK `Client`, one call in flight each,
back to back, in each protocol era: `get_agent_run` on a run of its own, or `tools/list`. The bare server is the
cost floor: the SDK's own serving and one upstream request, nothing of ours. Each target's CPU per call is
compared with the bare server's in the same round (the targets take turns), and the ratio's median and spread
over the rounds are reported: steadier than calls/s on shared cores.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from fleet import ServerProcess, bare_server, mcp_server, process_tree, without_httptools
from http_load import ERAS, Call, LoadJob, LoadResult, Method, Tenant, run_load_process
from report import command_line, publish
from tenants import ORG_ID, TenantFixture, create_fixtures, lay_out_tokens

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from remote import RATE_LIMITS

METHODS: tuple[Method, ...] = ("tools/call", "tools/list")
TARGETS = {"bare": "bare SDK", "ours": "this server", "before": "before", "ours-h11": "this server on h11",
           "bare-h11": "bare SDK on h11", "bare-granian": "bare SDK on Granian"}


@dataclass
class Row:
    """One target in one cell, over the rounds: medians, so a burst of other work in one round moves nothing."""

    mode: str
    method: Method
    concurrency: int
    target: str
    loads: list[LoadResult] = field(default_factory=list)
    loadavgs: list[float] = field(default_factory=list)  # 1-minute load average after each round

    @property
    def rate(self) -> float:
        return statistics.median(load.rate for load in self.loads)

    @property
    def cpu_ms(self) -> float:
        return statistics.median(self.cpu_per_round)

    @property
    def cpu_per_round(self) -> list[float]:
        """Milliseconds of server CPU per call, round by round."""
        return [load.server_cpu / load.in_window * 1000 if load.in_window else 0.0 for load in self.loads]

    @property
    def errors(self) -> int:
        return sum(load.error_count + load.connect_failures for load in self.loads)


@dataclass
class Setup:
    """The sandbox, a run of its own for each tenant, and what the servers start with."""

    sandbox: SandboxServer
    fixtures: list[TenantFixture]
    env: dict[str, str]
    hidden: Path  # where `without_httptools` puts its stand-in


def set_up(stack: ExitStack, tenants: int) -> Setup:
    """A sandbox (limits far above the load) with `tenants` users, each with a token and runs of their own."""
    tokens, users = lay_out_tokens(tenants)
    config = SandboxConfig(tokens=tokens, rate_limits=parse_rate_limits(RATE_LIMITS), seed=15, org_id=ORG_ID)
    sandbox = stack.enter_context(SandboxServer(config))
    fixtures = create_fixtures(sandbox, users)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_AUTOMATION_", "CODEGEN_"))}
    env |= {"AGENT_AUTOMATION_BASE_URL": sandbox.url, "AGENT_AUTOMATION_RATE_LIMITS": RATE_LIMITS}
    return Setup(sandbox, fixtures, env, Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="no-httptools-"))))


def callers(fixtures: list[TenantFixture], method: Method, concurrency: int) -> list[Tenant]:
    """The first `concurrency` tenants, each calling `get_agent_run` on a run of its own, or `tools/list`."""
    return [Tenant({"Authorization": f"Bearer {f.token}", "X-Organization-Id": str(ORG_ID)},
                   (Call(method, "get_agent_run", {"agent_run_id": f.run_ids[0]})
                    if method == "tools/call" else Call(method),))
            for f in fixtures[:concurrency]]


def start(target: str, env: dict[str, str], before: Path | None, listing: bool, hidden: Path) -> ServerProcess:
    """`listing`: the bare server lists our tools (it could not answer their calls in their output schemas)."""
    if target in ("ours-h11", "bare-h11"):
        env = without_httptools(env, hidden)
    if target.startswith("bare"):
        return bare_server(env, env["AGENT_AUTOMATION_BASE_URL"], ORG_ID, *(["--our-list"] if listing else []),
                           *(["--stack", "granian"] if target == "bare-granian" else []))
    if target == "before":
        assert before is not None
        env = env | {"PYTHONPATH": os.pathsep.join([str(before), *filter(None, [env.get("PYTHONPATH")])])}  # first
    return mcp_server(TARGETS[target], env, "--auth", "request")


def measure(server: ServerProcess, row: Row, tenants: list[Tenant], duration: float, warmup: int,
            interval: float = 0.0) -> None:
    job = LoadJob(f"{server.url}/mcp", row.mode, tuple(tenants), duration, warmup, interval,
                  server_pids=process_tree(server.process.pid),
                  secrets=tuple(t.headers["Authorization"] for t in tenants))
    row.loads.append(run_load_process(job))
    row.loadavgs.append(os.getloadavg()[0])


def take_turns(setup: Setup, servers: dict[str, ServerProcess], cell: dict[str, Row], rounds: int, duration: float,
               warmup: int, interval: float = 0.0) -> None:
    """`rounds` rounds of one cell, each target measured once a round, in an order that rotates: a burst of other
    work falls on every target alike over the rounds, and each round's ratios compare targets measured together."""
    targets = list(cell)
    first = cell[targets[0]]
    tenants = callers(setup.fixtures, first.method, first.concurrency)
    for turn in range(rounds):
        for target in targets[turn % len(targets):] + targets[:turn % len(targets)]:
            setup.sandbox.state.limiter.reset()
            row = cell[target]
            measure(servers[target], row, tenants, duration, warmup, interval)
            load = row.loads[-1]
            print(f"{ERAS[row.mode]} {row.method} c={row.concurrency} {target} round {turn + 1}: {load.rate:.0f}/s, "
                  f"{row.cpu_per_round[-1]:.2f} ms CPU per call, errors {load.errors or 0} "
                  f"{load.error_samples[:1] or ''}, load {row.loadavgs[-1]:.1f}", flush=True)


def cpu_ratios(row: Row, base: Row) -> list[float]:
    """The target's CPU per call over the bare server's, round by round (the two ran in the same round)."""
    return [mine / theirs for mine, theirs in zip(row.cpu_per_round, base.cpu_per_round, strict=True) if theirs]


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}× ({min(values):.2f}–{max(values):.2f})" if values else "—"


def render(rows: list[Row], targets: list[str], command: str, machine_load: float, duration: float,
           rounds: int) -> str:
    by = {(r.mode, r.method, r.concurrency, r.target): r for r in rows}
    ours = [t for t in targets if t != "bare"]
    head = ["era", "method", "concurrency", "bare SDK calls/s (CPU per call)"]
    head += [f"{TARGETS[t]} calls/s (CPU per call)" for t in ours]
    head += [f"{TARGETS[t]} / bare: CPU per call (spread), calls/s" for t in ours]
    stacks = {"before": "the code of another tree (`--before`), on the same HTTP stack",
              "ours-h11": "this code with httptools hidden, so uvicorn parses with h11",
              "bare-h11": "the bare server on h11", "bare-granian": "the bare server's app on Granian 2 (Rust: hyper "
              "and tokio; one worker process, uvloop, single-threaded runtime), the worker's CPU included"}
    lines = [
        "## Serving cost over HTTP", "",
        f"Produced by `{command}` on loopback, {os.cpu_count()} cores shared with other work (1-minute load average "
        f"{machine_load:.1f} at the start; the median after each target's rounds in the last column). Each server is "
        f"one process; the load is a separate process of C tenants (own token, own SDK `Client`, one call in flight "
        f"each, back to back) that make a few unrecorded calls and then call for {duration:g} s, {rounds} rounds per "
        "cell with the targets taking turns in a rotating order, and each figure is the median of its rounds: "
        "`tools/call` is `get_agent_run` on a "
        "run of the tenant's own, `tools/list` the whole list, past the client's cache (both servers list the same 19 "
        "definitions: the bare server answers with ours, built once at its start, through the SDK's own "
        "handler). **calls/s**: calls that ended in the window; **CPU per call**: the server "
        "process's CPU time in the window over those calls; **/ bare**: a target's CPU per call over the bare "
        "server's in the same round, the median of the rounds and (in brackets) their smallest and largest, then "
        "the ratio of the calls/s medians. The bare SDK server (`benchmarks/bare_server.py`) forwards the call to "
        "the same sandbox and returns the service's JSON: no pacing, token check, typed models or error shape. "
        "Both run the SDK's Streamable HTTP app under uvicorn on uvloop with the httptools parser "
        "(`remote/serve.py`)."
        + "".join(f" **{TARGETS[t]}**: {stacks[t]}." for t in ours if t in stacks),
        "", "| " + " | ".join([*head, "errors", "load avg"]) + " |", "|" + "---|" * (len(head) + 2)]
    keys = dict.fromkeys((r.mode, r.method, r.concurrency) for r in rows)
    for mode, method, concurrency in keys:
        cells = [ERAS[mode], f"`{method}`", str(concurrency)]
        base = by.get((mode, method, concurrency, "bare"))
        found = [by.get((mode, method, concurrency, t)) for t in targets]
        for row in found:
            cells.append(f"{row.rate:.0f} ({row.cpu_ms:.2f} ms)" if row else "—")
        for target in ours:
            row = by.get((mode, method, concurrency, target))
            cells.append(f"{spread(cpu_ratios(row, base))}, {row.rate / base.rate:.2f}×"
                         if row and base and base.rate else "—")
        errors = sum(r.errors for r in found if r)
        loads = " / ".join(f"{statistics.median(r.loadavgs):.1f}" for r in found if r)
        lines.append("| " + " | ".join([*cells, str(errors), loads]) + " |")
    lines += ["", "### Reading the numbers", ""]
    for target in ours:
        for method in dict.fromkeys(r.method for r in rows):
            pairs = [(r, by.get((r.mode, method, r.concurrency, "bare"))) for r in rows
                     if r.target == target and r.method == method]
            rates = [r.rate / b.rate for r, b in pairs if b and b.rate]
            cpu = [ratio for r, b in pairs if b for ratio in cpu_ratios(r, b)]
            if rates and cpu:
                lines.append(f"- {TARGETS[target]}, `{method}`: CPU per call {min(cpu):.2f}× to {max(cpu):.2f}× the "
                             f"bare SDK server's over every round of every row (median {statistics.median(cpu):.2f}×); "
                             f"{min(rates):.2f}× to {max(rates):.2f}× its rate.")
    cpu_spreads = [(max(v) - min(v)) / statistics.median(v) for r in rows if r.target != "bare"
                   and (b := by.get((r.mode, r.method, r.concurrency, "bare"))) and (v := cpu_ratios(r, b))]
    rate_spreads = [(max(rates) - min(rates)) / statistics.median(rates) for r in rows
                    if (rates := [load.rate for load in r.loads]) and statistics.median(rates)]
    if cpu_spreads and rate_spreads:
        lines.append(f"- Noise: across the rounds of one cell the CPU-per-call ratio to the bare server spread over "
                     f"{statistics.median(cpu_spreads):.0%} of its median (max - min; up to {max(cpu_spreads):.0%}), "
                     f"a target's calls/s over {statistics.median(rate_spreads):.0%} (up to {max(rate_spreads):.0%}): "
                     "a difference smaller than that is not shown to be real.")
    lines += [
        "- On 2 shared cores the load process (an SDK `Client` per tenant, parsing every answer) is often the "
        "bottleneck, and other work shifts the rates from row to row: the CPU per call of each server process, "
        "against the bare server's in the same round, is the steadier comparison.",
    ]
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of load per row")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per cell, the targets taking turns")
    parser.add_argument("--warmup-calls", type=int, default=3, help="unrecorded calls per tenant before each row")
    parser.add_argument("--concurrency", default="1,10,50", help="tenants calling at once, comma-separated")
    parser.add_argument("--modes", default=",".join(ERAS), help="client modes: auto (2026-07-28), legacy")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--before", type=Path, help="a source tree (its src/) of our server to measure as well")
    parser.add_argument("--targets", default="", help=f"more targets, comma-separated: {', '.join(list(TARGETS)[3:])}")
    parser.add_argument("--write", type=Path, help="write the section into this report (e.g. docs/benchmarks.md)")
    args = parser.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",") if c]
    modes = [m for m in args.modes.split(",") if m]
    methods = [m for m in args.methods.split(",") if m]
    extra = [t for t in args.targets.split(",") if t]
    if not all(1 <= c <= 200 for c in levels) or set(modes) - set(ERAS) or set(methods) - set(METHODS) \
            or not 0 < args.duration <= 120 or not 1 <= args.rounds <= 20 or set(extra) - set(list(TARGETS)[3:]):
        parser.error("concurrency 1-200, modes auto/legacy, methods tools/call,tools/list, duration up to 120 s, "
                     f"targets among {', '.join(list(TARGETS)[3:])}")
    targets = ["bare", "ours", *(["before"] if args.before else []), *extra]
    machine_load = os.getloadavg()[0]
    rows: list[Row] = []
    with ExitStack() as stack:
        setup = set_up(stack, max(levels))
        servers: dict[tuple[str, bool], ServerProcess] = {}
        for target, listing in itertools.product(targets, dict.fromkeys(m == "tools/list" for m in methods)):
            if listing and not target.startswith("bare") and (target, False) in servers:
                servers[target, True] = servers[target, False]  # ours lists its own tools
                continue
            servers[target, listing] = start(target, setup.env, args.before, listing, setup.hidden)
            stack.callback(servers[target, listing].stop)
        for mode, method, concurrency in itertools.product(modes, methods, levels):
            cell = {target: Row(mode, method, concurrency, target) for target in targets}
            rows += cell.values()
            take_turns(setup, {target: servers[target, method == "tools/list"] for target in targets}, cell,
                       args.rounds, args.duration, args.warmup_calls)
    publish(render(rows, targets, command_line("serving.py", argv), machine_load, args.duration, args.rounds),
            args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
