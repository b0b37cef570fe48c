"""Token checks across replicas: what 50 tenants on 3 replicas, and 1,500 random tokens, cost the service.

    .venv/bin/python benchmarks/token_checks.py [--before SRC] [--strangers 1500] [--slow-seconds 60]
                                                [--write docs/benchmarks.md]

One sandbox (in a thread of this process: its request log counts every request that reached the service) with a
token per tenant, and per code measured (this tree's, and with `--before SRC` another source tree's, e.g. `git
archive main src | tar -x -C /tmp/main`): a fresh redis-server and 3 replicas in `--auth request` mode sharing it.
First every tenant calls `list_repositories` once on each replica (its organisation looked up: no
`X-Organization-Id`), 15 clients at a time; then one client sends `--strangers` random tokens round robin to the
replicas, 50 at a time, while 5 of the tenants keep calling `list_models`. Loopback only; everything it starts it
stops.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2
from fleet import SHARED_KEYS, ServerProcess, mcp_server, redis_server
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from redis import Redis
from report import command_line, publish
from stats import percentile

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.config import DEFAULT_TOKEN_CHECKS_PER_ADDRESS, DEFAULT_TOKEN_CHECKS_TOTAL
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer

TENANTS = tuple(f"tok-bench-tenant-{i:02d}" for i in range(50))
REPLICAS = 3
RATE_LIMITS = "standard=100000/30s,logs=100000/60s"  # pacing never waits: this counts requests
PAUSE_SECONDS = 2.0  # between a known tenant's calls while checks are slow: a person's pace in a chat
LIST_CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
LIST_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}


@dataclass
class Figures:
    checks: int = 0  # GET /v1/users/me while the tenants called
    lookups: int = 0  # GET /v1/organizations
    tenant_errors: int = 0
    stranger_checks: int = 0
    stranger_statuses: Counter[int] = field(default_factory=Counter)
    stranger_seconds: float = 0.0
    redis_keys: int = 0
    known_calls: int = 0
    known_errors: int = 0
    slow_calls: list[float] = field(default_factory=list)  # seconds, each known tenant's call while checks are slow
    slow_errors: int = 0


def client(url: str, token: str) -> Client:
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=120))
    return Client(streamable_http_client(url, http_client=http))


async def tenants_on_every_replica(urls: list[str], figures: Figures) -> None:
    limiter = anyio.CapacityLimiter(15)

    async def call(token: str, url: str) -> None:
        async with limiter, client(url, token) as session:
            if (await session.call_tool("list_repositories", {"limit": 1})).is_error:
                figures.tenant_errors += 1

    async with anyio.create_task_group() as group:
        for token in TENANTS:
            for url in urls:
                group.start_soon(call, token, url)


async def strangers(urls: list[str], count: int, figures: Figures) -> None:
    limiter = anyio.CapacityLimiter(50)
    flooding = True

    async def stranger(http: httpx2.AsyncClient, i: int) -> None:
        async with limiter:
            answer = await http.post(urls[i % len(urls)], json=LIST_CALL, headers=LIST_HEADERS | {
                "authorization": f"Bearer tok-{secrets.token_hex(12)}"})
        figures.stranger_statuses[answer.status_code] += 1

    async def known(token: str, url: str) -> None:
        async with client(url, token) as session:
            while flooding:
                figures.known_calls += 1
                if (await session.call_tool("list_models", {})).is_error:
                    figures.known_errors += 1
                await anyio.sleep(0.1)

    async with anyio.create_task_group() as outer:
        for i, token in enumerate(TENANTS[:5]):
            outer.start_soon(known, token, urls[(i + 1) % len(urls)])
        started = time.monotonic()
        async with httpx2.AsyncClient(timeout=60) as http, anyio.create_task_group() as group:
            for i in range(count):
                group.start_soon(stranger, http, i)
        figures.stranger_seconds = time.monotonic() - started
        flooding = False


async def known_while_checks_are_slow(urls: list[str], seconds: float, figures: Figures) -> None:
    async def known(token: str, first: int) -> None:
        until, turn = time.monotonic() + seconds, first
        async with httpx2.AsyncClient(timeout=60) as http:
            while time.monotonic() < until:
                started = time.monotonic()
                answer = await http.post(urls[turn % len(urls)], json=LIST_CALL, headers=LIST_HEADERS | {
                    "authorization": f"Bearer {token}"})
                figures.slow_calls.append(time.monotonic() - started)
                figures.slow_errors += answer.status_code != 200
                turn += 1
                await anyio.sleep(PAUSE_SECONDS)

    async with anyio.create_task_group() as group:
        for i, token in enumerate(TENANTS[:5]):
            group.start_soon(known, token, i)


def start_replicas(stack: ExitStack, env: dict[str, str], label: str = "") -> list[ServerProcess]:
    """REPLICAS servers in `--auth request` mode on `env`, each stopped when `stack` closes."""
    replicas: list[ServerProcess] = []
    for i in range(REPLICAS):
        replicas.append(mcp_server(f"replica {i}{label}", env, "--auth", "request"))
        stack.callback(replicas[-1].stop)
    return replicas


def slow_checks(sandbox: SandboxServer, env: dict[str, str], redis_url: str, seconds: float,
                figures: Figures) -> None:
    """Known tenants on new replicas whose verdicts are due, while the service takes 15 s to answer a check."""
    with Redis.from_url(redis_url) as connection:
        for key in connection.scan_iter("aamcp:*:verdict:*"):
            connection.delete(key)
    with ExitStack() as stack:
        urls = [f"{replica.url}/mcp" for replica in start_replicas(stack, env, " (slow checks)")]
        slow = {"latency": 15.0, "operations": ["get_current_user"]}
        httpx2.put(f"{sandbox.url}/_sandbox/faults", json=slow, timeout=10).raise_for_status()
        stack.callback(httpx2.put, f"{sandbox.url}/_sandbox/faults", json={}, timeout=10)
        anyio.run(known_while_checks_are_slow, urls, seconds, figures)


def measure(sandbox: SandboxServer, src: Path | None, count: int, slow_seconds: float) -> Figures:
    figures = Figures()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_AUTOMATION_", "CODEGEN_"))}
    if src is not None:
        env["PYTHONPATH"] = str(src)  # ahead of the installed package: the other tree's code
    with ExitStack() as stack:
        redis = redis_server()
        stack.callback(redis.stop)
        env |= {"AGENT_AUTOMATION_BASE_URL": sandbox.url, "AGENT_AUTOMATION_RATE_LIMITS": RATE_LIMITS,
                "AGENT_AUTOMATION_REDIS_URL": f"redis://127.0.0.1:{redis.port}/0", **SHARED_KEYS}
        replicas = start_replicas(stack, env)
        urls = [f"{replica.url}/mcp" for replica in replicas]
        log = sandbox.state.request_log
        before = len(log)
        anyio.run(tenants_on_every_replica, urls, figures)
        asked = Counter(record.operation for record in log[before:])
        figures.checks, figures.lookups = asked["get_current_user"], asked["list_organizations"]
        before = len(log)
        anyio.run(strangers, urls, count, figures)
        known = {record.token_hash for record in log[:before]}
        figures.stranger_checks = sum(1 for record in log[before:]
                                      if record.operation == "get_current_user" and record.token_hash not in known)
        with Redis.from_url(f"redis://127.0.0.1:{redis.port}/0") as connection:
            figures.redis_keys = connection.dbsize()
        for replica in replicas:
            replica.stop()
        slow_checks(sandbox, env, f"redis://127.0.0.1:{redis.port}/0", slow_seconds, figures)
    return figures


def report(rows: dict[str, Figures], count: int, slow_seconds: float, argv: list[str] | None) -> str:
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        "## Token checks across replicas",
        "",
        f"`{command_line('token_checks.py', argv)}`; load average {load} (other sessions shared the machine).",
        f"{REPLICAS} replicas in `--auth request` mode sharing one redis-server, the sandbox counting every request "
        f"that reached it. {len(TENANTS)} tenants each call `list_repositories` once on every replica (the token "
        f"checked, its organisation looked up); then one client sends {count:,} random tokens round robin to the "
        "replicas, 50 at a time, while 5 of the tenants keep calling `list_models`.",
        "",
        "| code | checks, 50 tenants × 3 replicas | organisation lookups | tenant errors | random tokens: "
        "checks upstream | answers (status: count) | seconds | Redis keys after | known tenants' calls "
        "(errors) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, f in rows.items():
        statuses = ", ".join(f"{status}: {n:,}" for status, n in sorted(f.stranger_statuses.items()))
        lines.append(f"| {name} | {f.checks} | {f.lookups} | {f.tenant_errors} | {f.stranger_checks:,} | {statuses} "
                     f"| {f.stranger_seconds:.1f} | {f.redis_keys:,} | {f.known_calls} ({f.known_errors}) |")
    lines += ["", "Checks and lookups are once per token whatever the number of replicas (shared through Redis); "
              "checks of tokens never accepted before spend from the strangers' budget "
              f"({DEFAULT_TOKEN_CHECKS_PER_ADDRESS} per client address, twice that per network and "
              f"{DEFAULT_TOKEN_CHECKS_TOTAL} over the networks no accepted token came from, per minute by default, "
              "see docs/remote-limits.md), past which the gate answers 429 without asking "
              "the service. The tenants, new tokens from the same address a moment before, spent "
              "from that budget too, so the random tokens got what they left of it. Redis keys: each checked "
              "token's verdict and pacing keys (and each tenant's organisations), plus the budget's "
              "lists (per address, network and total) and the networks vouched for.",
              "",
              "The service slow to check tokens (15 s, past the check's 10 s): 5 known tenants call `tools/list`, "
              f"each {PAUSE_SECONDS:g} s after its last answer, for {slow_seconds:g} s on 3 new replicas, their "
              "verdicts due (as when their 5 minutes are over), what was recalled of them kept.",
              "",
              "| code | calls (errors) | p50 | p90 | slowest |",
              "|---|---|---|---|---|"]
    for name, f in rows.items():
        lines.append(f"| {name} | {len(f.slow_calls)} ({f.slow_errors}) | {percentile(f.slow_calls, 50):.2f} s | "
                     f"{percentile(f.slow_calls, 90):.2f} s | {max(f.slow_calls, default=0):.2f} s |")
    lines += ["", "Before, a request whose token's verdict was due waited for the check (10 s at most, then served on "
              "the verdict of the last day, remembered 10 s), so each tenant stalled about every 20 s; now a known "
              "tenant is served at once on that verdict while the check runs behind."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a source tree (its src/) to measure as well, first")
    parser.add_argument("--strangers", type=int, default=1500, help="random tokens sent (default 1500)")
    parser.add_argument("--slow-seconds", type=float, default=60.0,
                        help="how long known tenants call while checks are slow (default 60)")
    parser.add_argument("--write", type=Path, help="rewrite this section of the given markdown file")
    args = parser.parse_args(argv)
    config = SandboxConfig(tokens=TENANTS, rate_limits=parse_rate_limits(RATE_LIMITS))
    rows: dict[str, Figures] = {}
    with SandboxServer(config) as sandbox:
        if args.before:
            rows["before"] = measure(sandbox, args.before, args.strangers, args.slow_seconds)
        rows["this tree"] = measure(sandbox, None, args.strangers, args.slow_seconds)
    publish(report(rows, args.strangers, args.slow_seconds, argv), args.write)


if __name__ == "__main__":
    sys.exit(main())
