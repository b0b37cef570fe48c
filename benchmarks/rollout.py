"""Rolling restart benchmark: replicas restarted one by one behind HAProxy under load; how many calls are lost.

    .venv/bin/python benchmarks/rollout.py [--tenants 20] [--rate 40] [--duration 120]
                                           [--configs shipped,plain] [--write docs/benchmarks.md]

One sandbox with a token per tenant, one redis-server, 3 replicas of our server (`--auth request`, the same
`AGENT_AUTOMATION_STATE_KEYS`) behind HAProxy running `manifests/haproxy/haproxy.cfg` (`shipped`), or the same
file without its retry lines (`plain`: round robin with health checks on /readyz and HAProxy's default retry of a
failed connection on the same server), for comparison. A separate load process runs the tenants (SDK clients over
Streamable HTTP, 2026-07-28, each with its own token) at an offered rate; once they call, each replica in turn is
sent SIGTERM, waited for until it exits, and started again on its port, and the next one follows once it is ready.
A lost call is any call that did not answer with its result: an error, a refusal, a timeout. Loopback only;
everything it starts it stops, on error too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
from fleet import HAPROXY, ServerProcess, balancer, free_port, mcp_server, redis_server
from http_load import Call, LoadJob, LoadResult, Tenant, run_load_process
from report import command_line, publish
from tenants import ORG_ID, TenantFixture, create_fixtures, lay_out_tokens, tenant

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from remote import RATE_LIMITS, haproxy_version, server_env

SHIPPED = Path(__file__).resolve().parent.parent / "manifests" / "haproxy" / "haproxy.cfg"
RETRY_LINES = ("retries", "retry-on", "option redispatch", "option http-buffer-request")
CONFIGS = {
    "shipped": "manifests/haproxy/haproxy.cfg",
    "plain": "the same without `retries`, `retry-on`, `option redispatch`, `option http-buffer-request`",
}
STATE_KEYS = "rollout-benchmark-state-key-0123456789abcdef"
REPLICAS = 3
WAIT_SECONDS = 4  # the long call of each tenant: get_agent_run waiting on a run that stays active
READY_PAUSE = 3.0  # after a restarted replica answers /readyz: HAProxy's checks mark it up (rise 2, fastinter)


@dataclass
class Restart:
    drain: float  # SIGTERM to exit
    start: float  # exec to listening
    code: int | None


@dataclass
class Outcome:
    config: str
    load: LoadResult
    restarts: list[Restart]
    created_upstream: int  # create_agent_run requests the sandbox answered 2xx
    loadavg: tuple[float, float]
    restart_span: tuple[float, float] = (0.0, 0.0)  # seconds into the load when the first SIGTERM and last start came
    notes: list[str] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return sum(len(v) for v in self.load.latencies.values()) + self.load.error_count

    @property
    def lost(self) -> int:
        return self.load.error_count + self.load.connect_failures

    @property
    def created(self) -> int:
        return len(self.load.latencies.get("create_agent_run", []))


def config_text(name: str) -> str:
    text = SHIPPED.read_text()
    if name == "plain":
        text = "".join(line for line in text.splitlines(keepends=True) if not line.strip().startswith(RETRY_LINES))
    return text


@contextmanager
def fleet(config: str, env: dict[str, str]) -> Iterator[tuple[list[int], list[ServerProcess], str]]:
    """3 replicas on fixed ports and HAProxy in front of them with `config`; all stopped on exit."""
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="rollout-") as folder:
        ports = [free_port() for _ in range(REPLICAS)]
        replicas = [mcp_server(f"replica {n}", env, "--auth", "request", port=p) for n, p in enumerate(ports)]
        stack.callback(lambda: [r.stop() for r in replicas])  # the list as it is then: restarted ones included
        path = Path(folder) / "haproxy.cfg"
        path.write_text(config_text(config))
        front = balancer(path, free_port(), ports, {"PATH": os.environ.get("PATH", "")})
        stack.callback(front.stop)
        for replica in replicas:
            wait_ready(replica)
        time.sleep(READY_PAUSE)
        yield ports, replicas, f"{front.url}/mcp"


def wait_ready(replica: ServerProcess, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"{replica.url}/readyz", timeout=2).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{replica.name} was not ready within {timeout:g} s")


def rolling_restart(ports: list[int], replicas: list[ServerProcess], env: dict[str, str]) -> list[Restart]:
    """SIGTERM one replica, wait for it to exit, start it again on its port; when it is ready, the next."""
    restarts = []
    for number, port in enumerate(ports):
        old = replicas[number]
        began = time.monotonic()
        old.process.send_signal(signal.SIGTERM)
        try:
            code = old.process.wait(timeout=120)
        except Exception:
            code = None
        drained = time.monotonic()
        old.stop()
        replicas[number] = mcp_server(f"replica {number}", env, "--auth", "request", port=port)
        started = time.monotonic()
        wait_ready(replicas[number])
        time.sleep(READY_PAUSE)
        restarts.append(Restart(drained - began, started - drained, code))
    return restarts


def tenants_with_long_and_creating_calls(sandbox: SandboxServer, fixtures: list[TenantFixture]) -> tuple[Tenant, ...]:
    """Each tenant's reads (benchmarks/tenants.py; not held to its two runs: it creates more), a call that waits
    4 s on a run that stays active, and a create_agent_run, which must never be lost nor sent twice."""
    out = []
    with httpx2.Client(base_url=sandbox.url, timeout=10) as http:
        for number, fixture in enumerate(fixtures):
            active = http.post("/_sandbox/runs", json={"status": "ACTIVE", "user_id": fixture.user_id})
            active.raise_for_status()
            reads = tenant(fixture, number)
            extra = (Call("tools/call", "get_agent_run", {"agent_run_id": int(active.json()["id"]),
                                                          "wait_seconds": WAIT_SECONDS}),
                     Call("tools/call", "create_agent_run", {"prompt": f"rollout benchmark, tenant {number}"}))
            calls = tuple(Call(call.method, call.tool, call.arguments) for call in reads.calls)
            out.append(Tenant(reads.headers, calls + extra))
    return tuple(out)


def measure(config: str, sandbox: SandboxServer, tenants: tuple[Tenant, ...], env: dict[str, str],
            args: argparse.Namespace, secrets: tuple[str, ...]) -> Outcome:
    with fleet(config, env) as (ports, replicas, url):
        job = LoadJob(url, "auto", tenants, args.duration, warmup_calls=0, interval=len(tenants) / args.rate,
                      call_timeout=60.0, secrets=secrets)
        sandbox.request_log.clear()
        results: list[LoadResult] = []
        failures: list[BaseException] = []

        def load() -> None:
            try:
                results.append(run_load_process(job))
            except BaseException as exc:  # reported below, with the fleet stopped
                failures.append(exc)

        loadavg = os.getloadavg()[0]
        thread = threading.Thread(target=load, daemon=True)
        thread.start()
        deadline = time.monotonic() + 150
        while len(sandbox.request_log) < 4 * len(tenants) and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.2)  # until the tenants have connected and call
        began = time.monotonic()
        time.sleep(2.0)
        restarts = rolling_restart(ports, replicas, env)
        restarted = time.monotonic() - began
        thread.join(timeout=args.duration + 400)
        if failures or not results:
            raise RuntimeError(f"the load failed: {failures[:1]}")
        created = sum(1 for r in list(sandbox.request_log)
                      if r.operation == "create_agent_run" and 200 <= r.status < 300)
        outcome = Outcome(config, results[0], restarts, created, (loadavg, os.getloadavg()[0]), (2.0, restarted))
        if restarted > args.duration:
            outcome.notes.append("the restarts outlasted the load: calls after it were not measured")
        return outcome


def render(outcomes: list[Outcome], args: argparse.Namespace, command: str) -> str:
    lines = [
        "## Rolling restart behind HAProxy", "",
        f"Produced by `{command}` on loopback, {os.cpu_count()} cores shared with other work (the 1-minute load "
        "average before → after each row is in its last column).", "",
        f"- **Setup**: one sandbox with a token per tenant; one redis-server shared by {REPLICAS} replicas "
        "(`--auth request`, one `AGENT_AUTOMATION_STATE_KEYS`, default `--shutdown-grace` of 60 s) behind HAProxy "
        f"{haproxy_version()}. **shipped**: `{CONFIGS['shipped']}` as it is. **plain**: {CONFIGS['plain']}: round "
        "robin with health checks on `/readyz` and HAProxy's default retry of a failed connection, on the same "
        "server.",
        f"- **Load**: a separate process; {args.tenants} tenants, each an SDK `Client` (2026-07-28) with its own "
        f"token, {args.rate:g} calls a second together for {args.duration:g} s, one call in flight each, in turn: "
        "`get_agent_run`, `get_agent_run_logs`, `get_agent_run` (another run), `list_agent_runs`, "
        f"`get_agent_run` waiting {WAIT_SECONDS} s on a run that stays active (a call in flight through each "
        "drain), `create_agent_run`.",
        "- **Rollout**: once the tenants call, each replica in turn gets SIGTERM; when it has exited it is "
        f"started again on its port, and {READY_PAUSE:g} s after it answers `/readyz` (HAProxy's checks mark it "
        "up) the next one follows. **lost**: calls that did not answer with their result (errors of any kind, "
        "timeouts, sessions that broke). **created**: `create_agent_run` calls answered with a run, against "
        "the runs the sandbox created: a difference would be a create sent twice (or lost after it was made).", "",
        "| HAProxy config | calls | lost | lost by kind | created / upstream creates | drain s per replica "
        "| start s per replica | load avg |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for outcome in outcomes:
        kinds = ", ".join(f"{kind} ×{count}" for kind, count in sorted(outcome.load.errors.items())) or "—"
        lines.append(
            f"| {outcome.config} | {outcome.calls:,} | {outcome.lost} | {kinds} "
            f"| {outcome.created} / {outcome.created_upstream} "
            f"| {' / '.join(f'{r.drain:.1f}' for r in outcome.restarts)} "
            f"| {' / '.join(f'{r.start:.1f}' for r in outcome.restarts)} "
            f"| {outcome.loadavg[0]:.1f} → {outcome.loadavg[1]:.1f} |")
    lines.append("")
    for outcome in outcomes:
        notes = [f"the restarts took {outcome.restart_span[1]:.0f} s of the {args.duration:g} s of load",
                 f"exit codes {', '.join(str(r.code) for r in outcome.restarts)}", *outcome.notes]
        if outcome.load.error_samples:
            notes.append("e.g. " + " | ".join(outcome.load.error_samples[:2]))
        lines.append(f"- {outcome.config}: {'; '.join(notes)}.")
    lines += ["", "A draining replica answers new requests 503 before any tool, token check or upstream request, "
              "with `Retry-After` and `Connection: close`, and ends its listening GET streams; its calls in flight "
              "finish (the drain column: about the longest call in flight, here the 4 s wait). With the shipped "
              "config HAProxy sends each such 503, and each connection refused by a replica that has exited, to "
              "another replica; without it they reach the clients.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--rate", type=float, default=40.0, help="calls a second all tenants offer together")
    parser.add_argument("--duration", type=float, default=120.0,
                        help="seconds of load per config (the restarts must end within it)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"from {', '.join(CONFIGS)}")
    parser.add_argument("--write", type=Path, help="write the section into this report (e.g. docs/benchmarks.md)")
    args = parser.parse_args(argv)
    configs = [c for c in args.configs.split(",") if c]
    if set(configs) - set(CONFIGS) or not 1 <= args.tenants <= 200 or not 0 < args.rate <= 1000 \
            or not 10 <= args.duration <= 600:
        parser.error("configs from shipped, plain; tenants 1-200; rate up to 1000; duration 10-600 s")
    if shutil.which("redis-server") is None or not Path(HAPROXY).exists():
        print("needs redis-server and haproxy (apt-get install redis-server haproxy)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind, stopping every process started
    tokens, users = lay_out_tokens(args.tenants)
    config = SandboxConfig(tokens=tokens, rate_limits=parse_rate_limits(RATE_LIMITS), seed=13, org_id=ORG_ID)
    outcomes = []
    with ExitStack() as stack:
        sandbox = stack.enter_context(SandboxServer(config))
        redis = redis_server()
        stack.callback(redis.stop)
        fixtures = create_fixtures(sandbox, users)
        tenants = tenants_with_long_and_creating_calls(sandbox, fixtures)
        env = server_env(sandbox, f"redis://127.0.0.1:{redis.port}/0", "request", tokens[0])
        env["AGENT_AUTOMATION_STATE_KEYS"] = STATE_KEYS
        for name in configs:
            outcome = measure(name, sandbox, tenants, env, args, tuple(f.token for f in fixtures))
            outcomes.append(outcome)
            print(f"{name}: {outcome.calls} calls, {outcome.lost} lost {outcome.load.errors or ''}, drains "
                  f"{[round(r.drain, 1) for r in outcome.restarts]} s", flush=True)
    publish(render(outcomes, args, command_line("rollout.py", argv)), args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
