"""Sign-ins across Redis restarting empty and Redis away: how many people can go on without signing in again.

    .venv/bin/python benchmarks/redis_restart.py [--before ROOT] [--people 20] [--outage 10]
                                                 [--write docs/benchmarks.md]

Per code measured (this tree's, and with `--before ROOT` another tree's `src/` and `manifests/haproxy/haproxy.cfg`,
e.g. `git archive main src manifests | tar -x -C /tmp/main`): a redis-server without persistence, 3 replicas in
`--auth oauth` mode behind that tree's HAProxy config, one sandbox (in a thread). `--people` people sign in, each
with their own Codegen token, through registration and the consent page as a browser posts it. Then Redis is
restarted empty, and each person's app makes a call with its access token, refreshes, and calls with the new one;
an app that gets a refusal tries its consent page (as the SDK's client does after a 401): "known" if the page
shows, "stuck" if it says the app is not known (its person must add the server again). Then Redis is stopped for
`--outage` seconds, each app calling once a second and refreshing once meanwhile, and started again, empty, for a
last call and refresh. Loopback only; everything it starts it stops, on error too.
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
from typing import Any
from urllib.parse import urlencode

import httpx2
from cryptography.fernet import Fernet
from fleet import HAPROXY, SHARED_KEYS, ServerProcess, free_port, mcp_server, redis_server
from report import command_line, publish
from signin_flood import REDIRECT_URI, sign_in

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer

ROOT = Path(__file__).resolve().parent.parent
RATE_LIMITS = "standard=100000/30s,logs=100000/60s"  # pacing never waits: this counts answers
REPLICAS = 3
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}


@dataclass
class App:
    """One person's app: its client id and its current tokens."""

    client_id: str
    tokens: dict[str, Any]


@dataclass
class Phase:
    calls: Counter[int] = field(default_factory=Counter)
    refreshes: Counter[int] = field(default_factory=Counter)
    consent: Counter[str] = field(default_factory=Counter)  # after a refusal: "known" or "stuck"


def call(http: httpx2.Client, origin: str, app: App) -> int:
    return http.post(f"{origin}/mcp", json=LIST_TOOLS, headers={
        "authorization": f"Bearer {app.tokens['access_token']}", "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}).status_code


def refresh(http: httpx2.Client, origin: str, app: App) -> int:
    answer = http.post(f"{origin}/token", data={"grant_type": "refresh_token", "client_id": app.client_id,
                                                "refresh_token": app.tokens.get("refresh_token", "")})
    if answer.status_code == 200:
        app.tokens = answer.json()
    return answer.status_code


def consent_page(http: httpx2.Client, origin: str, app: App) -> str:
    page = http.get(f"{origin}/authorize?" + urlencode({
        "response_type": "code", "client_id": app.client_id, "redirect_uri": REDIRECT_URI,
        "code_challenge": secrets.token_urlsafe(32)[:43], "code_challenge_method": "S256"}))
    return "known" if page.status_code == 200 else "stuck" if "not known" in page.text else f"{page.status_code}"


def go_on(http: httpx2.Client, origin: str, apps: list[App], phase: Phase) -> None:
    """Each app calls, refreshes and calls again; one refused anywhere tries its consent page."""
    for app in apps:
        statuses = [call(http, origin, app), refresh(http, origin, app)]
        phase.refreshes[statuses[1]] += 1
        statuses.append(call(http, origin, app))
        phase.calls.update(statuses[::2])
        if any(status != 200 for status in statuses):
            phase.consent[consent_page(http, origin, app)] += 1


def measure(sandbox: SandboxServer, tokens: list[str], root: Path | None, outage: float) -> dict[str, Phase]:
    phases = {"restart": Phase(), "outage": Phase(), "after": Phase()}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_AUTOMATION_", "CODEGEN_"))}
    if root is not None:
        env["PYTHONPATH"] = str(root / "src")  # ahead of the installed package: the other tree's code
    config = (root or ROOT) / "manifests" / "haproxy" / "haproxy.cfg"
    with ExitStack() as stack, httpx2.Client(timeout=30) as http:
        redis = [redis_server()]
        stack.callback(lambda: redis[-1].stop())
        port = free_port()
        origin = f"http://127.0.0.1:{port}"
        env |= {"AGENT_AUTOMATION_BASE_URL": sandbox.url, "AGENT_AUTOMATION_RATE_LIMITS": RATE_LIMITS,
                "AGENT_AUTOMATION_REDIS_URL": f"redis://127.0.0.1:{redis[0].port}/0",
                "AGENT_AUTOMATION_OAUTH_KEYS": Fernet.generate_key().decode(), **SHARED_KEYS,
                "AGENT_AUTOMATION_OAUTH_SIGNINS_PER_MINUTE": "100", "AGENT_AUTOMATION_TRUSTED_PROXIES": "127.0.0.1",
                "AGENT_AUTOMATION_LOG_LEVEL": "ERROR"}
        replicas = [mcp_server(f"replica {i}", env, "--auth", "oauth", "--public-url", origin, "--allowed-host",
                               f"127.0.0.1:{port}") for i in range(REPLICAS)]
        for replica in replicas:
            stack.callback(replica.stop)
        balancer = ServerProcess("haproxy", [HAPROXY, "-db", "-f", str(config)], port, env={
            "MCP_BIND": f"127.0.0.1:{port}", **{f"REPLICA_{i + 1}": f"127.0.0.1:{r.port}"
                                               for i, r in enumerate(replicas)}})
        stack.callback(balancer.stop)
        time.sleep(2.5)  # HAProxy's health checks mark the replicas up
        apps = [App(*sign_in(origin, token)) for token in tokens]
        assert all(call(http, origin, app) == 200 for app in apps), "a sign-in did not serve"
        redis[-1].stop()
        redis.append(redis_server(redis[0].port))  # same port, empty
        go_on(http, origin, apps, phases["restart"])
        redis[-1].stop()
        ends = time.monotonic() + outage
        while time.monotonic() < ends:
            phases["outage"].calls.update(call(http, origin, app) for app in apps)
            time.sleep(1)
        go_on(http, origin, apps, phases["outage"])
        redis.append(redis_server(redis[0].port))  # back, empty again
        time.sleep(2.5)  # each replica asks Redis again 2 s after it last failed
        go_on(http, origin, apps, phases["after"])
    return phases


def report(rows: dict[str, dict[str, Phase]], people: int, outage: float, argv: list[str] | None) -> str:
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())

    def ok(counts: Counter[int]) -> str:
        return f"{counts[200]} of {sum(counts.values())}"

    def consent(counts: Counter[str]) -> str:
        return ", ".join(f"{what} {n}" for what, n in sorted(counts.items())) or "none needed"

    lines = [
        "## Sign-ins across a Redis restart",
        "",
        f"`{command_line('redis_restart.py', argv)}`; load average {load} at the end (other sessions shared the "
        f"machine). {REPLICAS} replicas in `--auth oauth` mode on one redis-server without persistence, behind the "
        f"tree's `manifests/haproxy/haproxy.cfg`; {people} people signed in, each with their own Codegen token. "
        "Redis is restarted empty, then each app calls, refreshes and calls again; then Redis is stopped for "
        f"{outage:g} s (each app calling once a second, then calling, refreshing and calling again before Redis "
        "returns) and started again, empty, for a last round. An app refused anywhere opens its consent page, as the "
        "SDK's client does after a 401: *known* (its person can paste the token again) or *stuck* (\"This app is "
        "not known to this server\": the person must remove and add the server).",
        "",
        "| code | after the restart: calls / refreshes ok | consent pages | during the outage: calls / refreshes ok "
        "| consent pages | after it: calls / refreshes ok | consent pages |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, phases in rows.items():
        cells = [f"{ok(p.calls)} / {ok(p.refreshes)} | {consent(p.consent)}" for p in phases.values()]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "Before, Redis held every sign-in and registration: after the restart each app's access token was "
              "unknown, its refresh refused, and its client id too, so the SDK's client, which never registers "
              "again, led its person to an error page; during the outage every call and refresh answered 503. Now "
              "the tokens carry their sign-in and the client id its registration, sealed with the state keys: "
              "nothing needed is lost, and Redis away only leaves revocations unchecked meanwhile."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a tree (its src/ and manifests/) to measure as well, first")
    parser.add_argument("--people", type=int, default=20, help="people signed in (default 20)")
    parser.add_argument("--outage", type=float, default=10.0, help="seconds Redis is stopped (default 10)")
    parser.add_argument("--write", type=Path, help="rewrite this section of the given markdown file")
    args = parser.parse_args(argv)
    tokens = [f"tok-bench-person-{n}" for n in range(args.people)]
    config = SandboxConfig(tokens=tuple(tokens), rate_limits=parse_rate_limits(RATE_LIMITS))
    rows: dict[str, dict[str, Phase]] = {}
    with SandboxServer(config) as sandbox:
        if args.before:
            rows["before"] = measure(sandbox, tokens, args.before, args.outage)
        rows["this tree"] = measure(sandbox, tokens, None, args.outage)
    publish(report(rows, args.people, args.outage, argv), args.write)


if __name__ == "__main__":
    sys.exit(main())
