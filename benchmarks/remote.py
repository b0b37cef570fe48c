"""Remote-mode benchmark: many tenants through a load balancer to several replicas sharing pacing through Redis.

    .venv/bin/python benchmarks/remote.py [--duration 30] [--tenants 200] [--rates 0,40] [--auth request]
                                          [--targets lb,replica,bare] [--modes auto,legacy] [--profile]
                                          [--write docs/benchmarks.md]

One sandbox with a token per tenant, one redis-server, and per target: 3 replica processes of our server behind
HAProxy (round robin per request, no stickiness), one replica alone, or the SDK's bare server alone
(benchmarks/bare_server.py). A separate load process runs the tenants, each an SDK `Client` over Streamable HTTP
with its own token, calling read tools on its own runs only, in each protocol era. The sandbox runs in a thread of
this process; its request log (what `GET /_sandbox/requests` serves) then says whether every request reached the
service under the token of the tenant whose run it named, and how many answers were 429. Loopback only;
everything it starts it stops, on error too, and its processes die with it even when it is killed outright.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from fleet import HAPROXY, SHARED_KEYS, Haproxy, ServerProcess, bare_server, mcp_server, redis_server
from http_load import ERAS, LoadJob, LoadResult, run_load_process
from redis import Redis
from report import command_line, publish
from sampling import sampling
from stats import percentile
from tenants import (
    ORG_ID,
    TenantFixture,
    TokenCheck,
    check_tokens,
    create_fixtures,
    lay_out_tokens,
    tenant,
)

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.pacing.redis_ledger import RETRY_REDIS_AFTER
from agent_automation_mcp.redis_pool import REDIS_TIMEOUT
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer

# Room for every tenant on both sides, so that pacing never waits: this measures serving, not the limits.
RATE_LIMITS = ("standard=100000/30s,logs=100000/60s,agent_creation=1000/60s,setup_commands=1000/60s,"
               "log_analysis=1000/60s,pr_edit=1000/60s,webhook_test=1000/60s,cli_rules=1000/60s")
TARGETS = {
    "lb": "{replicas} replicas behind HAProxy",
    "replica": "1 replica, no load balancer",
    "bare": "the SDK's bare server, 1 process",
}
MODES = tuple(ERAS)
REDIS_FALLBACK = re.compile(r"Redis is unreachable \((\w+)")  # a replica's log line when it paces locally
PACING_FRAME = r"pacing/\w+\.py"  # a stack under the pacer (fifo.py, redis_ledger.py, ...): its Redis calls too


@dataclass
class Row:
    target: str
    mode: str
    offered: float  # calls a second the tenants offered together; 0: as many as they could
    load: LoadResult
    upstream: int  # requests the sandbox answered
    upstream_429: int
    tokens: TokenCheck
    memory_mib: list[tuple[float, float]]  # per server process: RSS after the load, peak RSS
    spread: dict[str, int] = field(default_factory=dict)  # responses per replica (through HAProxy)
    loadavg: tuple[float, float] = (0.0, 0.0)  # 1-minute load average before and after
    redis_fallbacks: Counter[str] = field(default_factory=Counter)  # why replicas paced locally, how often
    pacing_share: float | None = None  # of the servers' busy CPU (py-spy samples), with --profile
    redis_reply: float = 0.0  # bytes Redis sent per script it ran (acquire, settle, ...): nearly all it answers

    @property
    def p50(self) -> float:
        return percentile(self.load.all_latencies, 50)

    @property
    def p99(self) -> float:
        return percentile(self.load.all_latencies, 99)


def server_env(sandbox: SandboxServer, redis_url: str, auth: str, env_token: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_AUTOMATION_", "CODEGEN_"))}
    env |= {"AGENT_AUTOMATION_BASE_URL": sandbox.url, "AGENT_AUTOMATION_RATE_LIMITS": RATE_LIMITS,
            "AGENT_AUTOMATION_REDIS_URL": redis_url, **SHARED_KEYS}
    if auth == "env":
        env |= {"AGENT_AUTOMATION_API_TOKEN": env_token, "AGENT_AUTOMATION_ORG_ID": str(ORG_ID)}
    return env


@dataclass
class Served:
    url: str  # the MCP endpoint
    servers: list[ServerProcess]  # the MCP server processes
    balancer: Haproxy | None


@dataclass
class Bench:
    """What every row shares."""

    sandbox: SandboxServer
    redis_url: str
    fixtures: list[TenantFixture]
    duration: float
    warmup_calls: int
    profile: bool = False  # sample the servers with py-spy while the load runs


@contextmanager
def serving(target: str, replicas: int, env: dict[str, str], auth: str) -> Iterator[Served]:
    """The MCP endpoint of `target`, its server processes and its load balancer; all stopped on exit."""
    with ExitStack() as stack:
        servers: list[ServerProcess] = []
        balancer = None
        if target == "bare":
            servers.append(bare_server(env, env["AGENT_AUTOMATION_BASE_URL"], ORG_ID))
            stack.callback(servers[-1].stop)
        else:
            for number in range(replicas if target == "lb" else 1):
                servers.append(mcp_server(f"replica {number}", env, *(("--auth", "request") if auth == "request"
                                                                      else ())))
                stack.callback(servers[-1].stop)
        url = servers[0].url
        if target == "lb":
            balancer = Haproxy([s.port for s in servers], "/readyz" if auth == "request" else None)
            stack.callback(balancer.stop)
            url = balancer.url
        yield Served(f"{url}/mcp", servers, balancer)


def measure(target: str, mode: str, offered: float, served: Served, bench: Bench) -> Row:
    """One row: a clean Redis and sandbox log, the load in its own process, then what the servers and the
    sandbox saw."""
    with Redis.from_url(bench.redis_url) as redis:
        redis.flushall()
        redis.config_resetstat()
    bench.sandbox.state.limiter.reset()
    balancer, servers = served.balancer, served.servers
    before = balancer.responses_per_server() if balancer else {}
    job = LoadJob(served.url, mode, tuple(tenant(f, n) for n, f in enumerate(bench.fixtures)), bench.duration,
                  bench.warmup_calls, len(bench.fixtures) / offered if offered else 0.0,
                  server_pids=tuple(s.process.pid for s in servers),
                  secrets=tuple(f.token for f in bench.fixtures))
    logged = [len(s.stderr_text()) for s in servers]
    bench.sandbox.request_log.clear()
    load_before = os.getloadavg()[0]
    with ExitStack() as stack:
        samples = stack.enter_context(sampling(job.server_pids)) if bench.profile else None
        load = run_load_process(job)
    load_after = os.getloadavg()[0]
    with Redis.from_url(bench.redis_url) as redis:
        sent, scripts = redis.info("stats")["total_net_output_bytes"], redis.info("commandstats")
    redis_reply = sent / max(1, sum(scripts.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("evalsha", "eval")))
    records = [r for r in list(bench.sandbox.request_log) if r.operation is not None]
    memory = [(m["VmRSS"] / 1024, m["VmHWM"] / 1024) for m in (s.memory_kib() for s in servers)]
    spread = {}
    if balancer:
        spread = {name: count - before.get(name, 0) for name, count in balancer.responses_per_server().items()}
    fallbacks = Counter(reason for s, start in zip(servers, logged, strict=True)
                        for reason in REDIS_FALLBACK.findall(s.stderr_text()[start:]))
    return Row(target, mode, offered, load, len(records), sum(1 for r in records if r.status == 429),
               check_tokens(records, bench.fixtures), memory, spread, (load_before, load_after), fallbacks,
               samples.share(PACING_FRAME) if samples else None, redis_reply)


def label(target: str, replicas: int) -> str:
    return TARGETS[target].format(replicas=replicas)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def _offered(row: Row) -> str:
    return f"{row.offered:g}" if row.offered else "all they can"


def _per_call(cpu: float, row: Row) -> str:
    return f"{cpu / row.load.in_window * 1000:.1f} ms" if row.load.in_window else "—"


def _added(row: Row, base: Row | None) -> str:
    if base is None:
        return "—"
    return f"{(row.p50 - base.p50) * 1000:+.0f} / {(row.p99 - base.p99) * 1000:+.0f} ms"


def _ratio(row: Row | None, base: Row | None) -> str:
    return f"{row.load.rate / base.load.rate:.2f}×" if row and base and base.load.rate else "—"


AUTH_TEXT = {
    "request": "`--auth request`: every tenant's requests carry its own token (`Authorization: Bearer`), half of "
               "them also `X-Organization-Id`, the others leave the organisation for the server to find; the "
               "sandbox knows one user per token",
    "env": "**env-auth mode (`--auth env`), not the remote mode**: every replica calls the service with its one "
           "token from the environment whoever calls; the tenants' headers are sent and ignored, and the cap on "
           "calls in flight per token (`--max-tenant-calls`) counts all of them as one tenant. The token check "
           "flags every request, as it must: that is the leak detector at work, not a measurement of the remote "
           "mode",
}


def render(rows: list[Row], args: argparse.Namespace, command: str, machine_load: float) -> str:
    by = {(row.target, row.mode, row.offered): row for row in rows}
    lb = label("lb", args.replicas)
    lines = [
        "## Remote mode", "",
        f"Produced by `{command}` on loopback, {os.cpu_count()} cores shared with other work: the 1-minute load "
        f"average was {machine_load:.1f} at the start, and before → after each row is in its last column, so "
        f"absolute numbers are noisy. Auth: {AUTH_TEXT[args.auth]}.", "",
        f"- **Setup**: one sandbox with a token per tenant and limits far above the load "
        f"(`{RATE_LIMITS.split(',')[0]},...`, the same on the replicas: pacing never waits here); one "
        "redis-server shared by the replicas for pacing (`AGENT_AUTOMATION_REDIS_URL`, flushed before each row). "
        f"**{lb}**: HAProxy {haproxy_version()}, `balance roundrobin` per request on kept-alive connections, no "
        "stickiness, `http-reuse always`" + (", health checks on `/readyz`" if args.auth == "request" else "")
        + f". **{label('replica', args.replicas)}**: the same server, called directly. "
        f"**{label('bare', args.replicas)}**: `benchmarks/bare_server.py`, an `MCPServer` with the same three "
        "tools (names and arguments) that forwards the caller's `Authorization` to the sandbox over one pooled "
        "`httpx2` client and returns the service's JSON as it came: no pacing, no token check, no typed models, "
        "no trimming, no error shape; stateless Streamable HTTP.",
        f"- **Load**: a separate process; {args.tenants} tenants, each an SDK `Client` over Streamable HTTP with "
        "its own `httpx2.AsyncClient` (own headers and connections). All connect, make "
        f"{args.warmup_calls} unrecorded calls each (they fill the servers' per-token caches), then call together "
        f"for {args.duration:g} s, one call in flight each: back to back (*all they can*, a closed loop), or "
        "at an offered rate, the tenants spread evenly, each calling every tenants/rate seconds (a late call "
        "goes at once). The calls, in turn: `get_agent_run`, "
        "`get_agent_run_logs` (20 entries), `get_agent_run` (another run), `list_agent_runs` (its own user, 5). "
        "Each tenant names only its own two runs and its own user.",
        "- **calls/s**: successful calls that ended within the window. **p50 / p99**: per call, at the client. "
        "With every tenant calling back to back the servers are saturated, so latency is mostly queueing "
        "(Little's law: mean latency = tenants / rate); at an offered rate well below what the servers can do, "
        "it is the cost of a call itself. *added* is this row's minus the one-replica (for the load-balanced "
        "rows) or the bare-server row of the same era and offered rate.",
        "- **foreign token**: requests that reached the sandbox under another token than that of the tenant whose "
        "run (in the path) or user (in the query) they named, of all such requests (the sandbox's request log "
        "pairs a hash of the token with the path). **foreign answers**: successful calls whose answer was about "
        "a run that is not the tenant's own. **upstream requests** and **429** (answers the sandbox refused) "
        "count the warm-up too.",
        "- **CPU per call**: CPU time in the window of the server processes together (HAProxy not included) and "
        "of the load process, over the calls of the window. **RSS**: each server process after its rows (peak "
        "in brackets).", "",
        "| target | era | offered calls/s | calls/s | p50 / p99 | added vs 1 replica | added vs bare SDK | errors "
        "| upstream requests (429) | foreign token | foreign answers | CPU per call: servers, load "
        "| RSS MiB per process (peak) | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        versus_replica = _added(row, by.get(("replica", row.mode, row.offered))) if row.target == "lb" else "—"
        versus_bare = _added(row, by.get(("bare", row.mode, row.offered))) if row.target != "bare" else "—"
        memory = ", ".join(f"{rss:.0f} ({peak:.0f})" for rss, peak in row.memory_mib)
        foreign = f"{row.tokens.foreign:,} of {row.tokens.attributed:,}"
        lines.append(
            f"| {label(row.target, args.replicas)} | {ERAS[row.mode]} | {_offered(row)} "
            f"| {row.load.rate:.0f} "
            f"| {_ms(row.p50)} / {_ms(row.p99)} ms | {versus_replica} | {versus_bare} "
            f"| {row.load.error_count + row.load.connect_failures:,} | {row.upstream:,} ({row.upstream_429}) "
            f"| {foreign} | {row.load.foreign_results} | {_per_call(row.load.server_cpu, row)}, "
            f"{_per_call(row.load.load_cpu, row)} | {memory} | {row.loadavg[0]:.1f} → {row.loadavg[1]:.1f} |")
    lines += ["", "Per row:", ""]
    for row in rows:
        notes = [f"the load process used {row.load.load_cpu / row.load.window:.2f} s of CPU a second",
                 f"tenants connected in {percentile(row.load.connect_seconds, 50):.1f} s (median)",
                 f"{row.tokens.unattributed:,} upstream requests named no tenant's run or user (token checks, "
                 "organisation lookups), " + (f"{row.tokens.unknown_token:,} of all under no tenant's token"
                                              if row.tokens.unknown_token else "each under a tenant's token")]
        if row.spread:
            notes.append(f"responses per replica {' / '.join(map(str, row.spread.values()))}")
        if row.load.errors or row.load.connect_failures or row.load.warmup_errors:
            kinds = ", ".join(f"{kind} ×{count}" for kind, count in sorted(row.load.errors.items()))
            notes.append(f"errors: {kinds or 'none in the window'}; {row.load.warmup_errors} in the warm-up; "
                         f"{row.load.connect_failures} tenants could not connect")
        notes.append(f"Redis sent {row.redis_reply:,.0f} bytes per script it ran (acquire, settle) on average")
        if row.pacing_share is not None:
            notes.append(f"pacing (the pacer and its Redis calls) took {row.pacing_share:.1%} of the servers' busy "
                         "CPU (py-spy samples, warm-up included)")
        if row.redis_fallbacks:
            reasons = ", ".join(f"{reason} ×{count}" for reason, count in row.redis_fallbacks.items())
            notes.append(f"replicas logged 'Redis is unreachable' and paced locally for a while: {reasons}")
        lines.append(f"- {label(row.target, args.replicas)}, {ERAS[row.mode]}, offered "
                     f"{_offered(row)}: {'; '.join(notes)}.")
    ratios = [f"{ERAS[mode]}: {lb} {_ratio(by.get(('lb', mode, 0)), by.get(('replica', mode, 0)))} of one "
              f"replica's rate, one replica {_ratio(by.get(('replica', mode, 0)), by.get(('bare', mode, 0)))} of "
              "the bare SDK server's" for mode in dict.fromkeys(row.mode for row in rows)]
    lines += ["", "### Reading the numbers", "",
              f"- Rates: {'; '.join(ratios)}.",
              f"- On {os.cpu_count()} cores the replicas cannot add capacity: {args.replicas} server processes, "
              "HAProxy, the sandbox and the load process share them (with other work), so the load-balanced rows "
              "show what the extra hop and the extra processes cost, not what replicas on their own cores would "
              "serve. What the rows compare fairly is the CPU per call, and the latency at an offered rate the cores "
              "can serve.",
              "- Each replica checks each token once (`GET /v1/users/me`) and, for tenants without "
              "`X-Organization-Id`, finds its organisation once, so behind a round-robin balancer every tenant "
              "costs each replica those requests: they are the upstream requests that name no tenant's run."]
    reasons = {reason for row in rows for reason in row.redis_fallbacks}
    if "MaxConnectionsError" in reasons:
        lines.append("- MaxConnectionsError: a replica had more calls in flight than the Redis client's connection "
                     "pool holds (redis-py's asyncio pool: 100 connections by default, and it raises rather than "
                     f"waits when all are in use), so it paced locally on its share of each limit for "
                     f"{RETRY_REDIS_AFTER:g} s before trying Redis again. No request was lost, but pacing stopped "
                     "being shared for that while.")
    if "TimeoutError" in reasons:
        lines.append(f"- TimeoutError: a Redis round trip took longer than the client's {REDIS_TIMEOUT:g} s timeout on "
                     "the busy cores.")
    return "\n".join([*lines, ""])


def haproxy_version() -> str:
    out = subprocess.run([HAPROXY, "-v"], capture_output=True, text=True, timeout=10).stdout
    return out.split()[2] if out.startswith("HAProxy version") else "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load per target and era")
    parser.add_argument("--warmup-calls", type=int, default=6,
                        help="unrecorded calls per tenant before each window (default: %(default)s)")
    parser.add_argument("--tenants", type=int, default=200, help="tenants calling at once, one call in flight each")
    parser.add_argument("--replicas", type=int, default=3, help="replicas behind the load balancer")
    parser.add_argument("--auth", choices=("request", "env"), default="request",
                        help="request: each tenant's own token per request (--auth request); env: the replicas' "
                             "one token from the environment for everybody, tenants' headers ignored")
    parser.add_argument("--targets", default=",".join(TARGETS), help=f"from {', '.join(TARGETS)}")
    parser.add_argument("--modes", default=",".join(MODES), help="client modes: auto (2026-07-28), legacy")
    parser.add_argument("--rates", default="0",
                        help="calls a second all tenants offer together, comma-separated; 0: each tenant calls back "
                             "to back (default: %(default)s)")
    parser.add_argument("--profile", action="store_true",
                        help="sample the servers with py-spy during each row: the share of CPU spent pacing")
    parser.add_argument("--write", type=Path, help="write the section into this report (e.g. docs/benchmarks.md)")
    args = parser.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    modes = [m for m in args.modes.split(",") if m]
    rates = [float(r) for r in args.rates.split(",") if r]
    if set(targets) - set(TARGETS) or set(modes) - set(MODES):
        parser.error("unknown target or mode")
    if any(not 0 <= rate <= 10_000 for rate in rates):
        parser.error("rates 0-10000 calls a second")
    if not 1 <= args.tenants <= 1000 or not 1 <= args.replicas <= 8 or not 0 < args.duration <= 600:
        parser.error("tenants 1-1000, replicas 1-8, duration up to 600 s")
    if shutil.which("redis-server") is None or not Path(HAPROXY).exists():
        print("needs redis-server and haproxy (apt-get install redis-server haproxy)", file=sys.stderr)
        return 2

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind, stopping every process started
    machine_load = os.getloadavg()[0]
    tokens, users = lay_out_tokens(args.tenants)
    config = SandboxConfig(tokens=tokens, rate_limits=parse_rate_limits(RATE_LIMITS), seed=13,
                           org_id=ORG_ID)
    rows: list[Row] = []
    with ExitStack() as stack:
        sandbox = stack.enter_context(SandboxServer(config))
        redis = redis_server()
        stack.callback(redis.stop)
        redis_url = f"redis://127.0.0.1:{redis.port}/0"
        bench = Bench(sandbox, redis_url, create_fixtures(sandbox, users), args.duration, args.warmup_calls,
                      args.profile)
        env = server_env(sandbox, redis_url, args.auth, tokens[0])
        for target in targets:
            with serving(target, args.replicas, env, args.auth) as served:
                for mode, offered in itertools.product(modes, rates):
                    started = time.monotonic()
                    row = measure(target, mode, offered, served, bench)
                    rows.append(row)
                    print(f"{target} {ERAS[mode]} offered {offered or 'all'}: {row.load.rate:.1f} calls/s, "
                          f"p50 {row.p50 * 1000:.0f} ms, "
                          f"p99 {row.p99 * 1000:.0f} ms, errors {row.load.errors or 0} "
                          f"{row.load.error_samples[:2] or ''}, 429 {row.upstream_429}, "
                          f"foreign token {row.tokens.foreign}/{row.tokens.attributed}, "
                          + (f"pacing {row.pacing_share:.1%} of CPU, " if row.pacing_share is not None else "")
                          + f"Redis {row.redis_reply:,.0f} B per script, " +
                          f"in {time.monotonic() - started:.0f} s", flush=True)
    publish(render(rows, args, command_line("remote.py", argv), machine_load), args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
