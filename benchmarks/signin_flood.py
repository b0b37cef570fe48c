"""The sign-in flood: what one address with a spoofed X-Forwarded-For gets out of 3 sign-in replicas behind HAProxy.

    .venv/bin/python benchmarks/signin_flood.py [--before ROOT] [--registrations 2000] [--junk 600]
                                                [--write docs/benchmarks.md]

Per code measured (this tree's, and with `--before ROOT` another tree's `src/` and `manifests/haproxy/haproxy.cfg`,
e.g. `git archive main src manifests | tar -x -C /tmp/main`): a fresh redis-server, 3 replicas in `--auth oauth`
mode trusting HAProxy's address (`AGENT_AUTOMATION_TRUSTED_PROXIES=127.0.0.1`, as the docs advise) behind that
tree's HAProxy config, and one sandbox (in a thread: its request log counts what reached the service). One person
signs in first. Then, from one client, 50 requests at a time, each with its own made-up `X-Forwarded-For`:
`--registrations` registrations; `--junk` random bearer tokens at `/mcp`. And from the person's own address (no
made-up header: the company's address as the replicas see it), `--junk` anonymous `POST /token` with made-up
refresh tokens, after which the person refreshes. What Redis holds (`MEMORY USAGE` of every key) is summed
before and after the registrations. Loopback only; everything it starts it stops, on error too.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
import secrets
import sys
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import anyio
import httpx2
from cryptography.fernet import Fernet
from fleet import HAPROXY, ServerProcess, free_port, mcp_server, redis_server
from redis import Redis
from report import command_line, publish

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer

ROOT = Path(__file__).resolve().parent.parent
PERSON = "tok-bench-signin-person"
RATE_LIMITS = "standard=100000/30s,logs=100000/60s"  # pacing never waits: this counts requests
REPLICAS = 3
REDIRECT_URI = "http://127.0.0.1:9/callback"


@dataclass
class Figures:
    registrations: Counter[int] = field(default_factory=Counter)
    registration_seconds: float = 0.0
    redis_bytes: int = 0  # used_memory after the registrations, less before
    redis_keys: int = 0
    junk_tokens: Counter[int] = field(default_factory=Counter)
    refresh_status: int = 0
    strangers: Counter[int] = field(default_factory=Counter)
    upstream_checks: int = 0


def spoofed() -> dict[str, str]:
    return {"x-forwarded-for": f"198.{secrets.randbelow(256)}.{secrets.randbelow(256)}.{secrets.randbelow(254) + 1}"}


async def flood(count: int, send: Any) -> tuple[Counter[int], float]:
    """`send(http)` `count` times, 50 at a time; the statuses and the seconds it took."""
    statuses: Counter[int] = Counter()
    limiter = anyio.CapacityLimiter(50)

    async def one(http: httpx2.AsyncClient) -> None:
        async with limiter:
            statuses[(await send(http)).status_code] += 1

    started = time.monotonic()
    async with httpx2.AsyncClient(timeout=60) as http, anyio.create_task_group() as group:
        for _ in range(count):
            group.start_soon(one, http)
    return statuses, time.monotonic() - started


def sign_in(origin: str, token: str = PERSON) -> tuple[str, dict[str, Any]]:
    """A person's client id and tokens, registered and through the consent page as a browser posts it."""
    with httpx2.Client(timeout=30) as http:
        client_id = http.post(f"{origin}/register", json={"redirect_uris": [REDIRECT_URI],
                                                          "token_endpoint_auth_method": "none"}).json()["client_id"]
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        page = http.get(f"{origin}/authorize?" + urlencode({
            "response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT_URI,
            "code_challenge": challenge, "code_challenge_method": "S256"}))
        fields = {name: unescape(value) for name, value in
                  re.findall(r'<input type="hidden" name="([a-z]+)" value="([^"]*)">', page.text)}
        answer = http.post(f"{origin}/authorize", data={**fields, "token": token, "action": "approve"})
        code = parse_qs(urlsplit(answer.headers["location"]).query)["code"][0]
        tokens = http.post(f"{origin}/token", data={"grant_type": "authorization_code", "code": code,
                                                    "code_verifier": verifier, "client_id": client_id,
                                                    "redirect_uri": REDIRECT_URI}).json()
    return client_id, tokens


def stored_bytes(connection: Redis) -> int:
    """What Redis holds for every key (`MEMORY USAGE`), without its own overhead and its clients' buffers."""
    return sum(connection.memory_usage(key) or 0 for key in connection.scan_iter(count=1000))


def measure(sandbox: SandboxServer, root: Path | None, registrations: int, junk: int) -> Figures:
    figures = Figures()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_AUTOMATION_", "CODEGEN_"))}
    if root is not None:
        env["PYTHONPATH"] = str(root / "src")  # ahead of the installed package: the other tree's code
    config = (root or ROOT) / "manifests" / "haproxy" / "haproxy.cfg"
    with ExitStack() as stack:
        redis = redis_server()
        stack.callback(redis.stop)
        port = free_port()
        origin = f"http://127.0.0.1:{port}"
        env |= {"AGENT_AUTOMATION_BASE_URL": sandbox.url, "AGENT_AUTOMATION_RATE_LIMITS": RATE_LIMITS,
                "AGENT_AUTOMATION_REDIS_URL": f"redis://127.0.0.1:{redis.port}/0",
                "AGENT_AUTOMATION_OAUTH_KEYS": Fernet.generate_key().decode(),
                "AGENT_AUTOMATION_TRUSTED_PROXIES": "127.0.0.1",
                "AGENT_AUTOMATION_LOG_LEVEL": "WARNING"}
        replicas: list[ServerProcess] = []
        for i in range(REPLICAS):
            replicas.append(mcp_server(f"replica {i}", env, "--auth", "oauth", "--public-url", origin,
                                       "--allowed-host", f"127.0.0.1:{port}"))
            stack.callback(replicas[-1].stop)
        balancer = ServerProcess("haproxy", [HAPROXY, "-db", "-f", str(config)], port, env={
            "MCP_BIND": f"127.0.0.1:{port}", **{f"REPLICA_{i + 1}": f"127.0.0.1:{r.port}"
                                               for i, r in enumerate(replicas)}})
        stack.callback(balancer.stop)
        time.sleep(2.5)  # HAProxy's health checks mark the replicas up
        client_id, tokens = sign_in(origin)
        refresh_token = tokens["refresh_token"]
        connection = Redis.from_url(f"redis://127.0.0.1:{redis.port}/0")
        stack.callback(connection.close)
        before = stored_bytes(connection)
        body = {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"}
        figures.registrations, figures.registration_seconds = anyio.run(flood, registrations, lambda http: http.post(
            f"{origin}/register", json=body, headers=spoofed()))
        figures.redis_bytes = stored_bytes(connection) - before
        figures.junk_tokens, _ = anyio.run(flood, junk, lambda http: http.post(f"{origin}/token",
                                                                              data={"grant_type": "refresh_token",
                                                                                    "client_id": client_id,
                                                                                    "refresh_token": "aamcp_rt_" +
                                                                                    secrets.token_urlsafe(32)}))
        figures.refresh_status = httpx2.post(f"{origin}/token", timeout=30, data={
            "grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id}).status_code
        log = sandbox.state.request_log
        asked = len(log)
        figures.strangers, _ = anyio.run(flood, junk, lambda http: http.post(f"{origin}/mcp", json={}, headers={
            **spoofed(), "authorization": f"Bearer tok-{secrets.token_hex(12)}"}))
        figures.upstream_checks = sum(1 for record in log[asked:] if record.operation == "get_current_user")
        figures.redis_keys = connection.dbsize()
    return figures


def report(rows: dict[str, Figures], registrations: int, junk: int, argv: list[str] | None) -> str:
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())

    def statuses(counts: Counter[int]) -> str:
        return ", ".join(f"{status}: {n:,}" for status, n in sorted(counts.items()))

    lines = [
        "## Sign-in flood",
        "",
        f"`{command_line('signin_flood.py', argv)}`; load average {load} (other sessions shared the machine).",
        f"{REPLICAS} replicas in `--auth oauth` mode sharing one redis-server behind the tree's "
        "`manifests/haproxy/haproxy.cfg`, trusting HAProxy as the docs advise; one client, 50 requests at a time, "
        f"each with a made-up `X-Forwarded-For`: {registrations:,} registrations and {junk:,} random bearer tokens "
        f"at `/mcp`; and from the person's own address, {junk:,} anonymous `POST /token` with made-up refresh "
        "tokens, then the person's real refresh.",
        "",
        "| code | registrations (status: count) | seconds | Redis bytes added | junk /token | the real refresh "
        "| random tokens at /mcp | their checks upstream | Redis keys after |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, f in rows.items():
        lines.append(f"| {name} | {statuses(f.registrations)} | {f.registration_seconds:.1f} | {f.redis_bytes:,} | "
                     f"{statuses(f.junk_tokens)} | {f.refresh_status} | {statuses(f.strangers)} | "
                     f"{f.upstream_checks:,} | {f.redis_keys:,} |")
    lines += ["", "Before, each made-up `X-Forwarded-For` was a new client address: every registration was stored "
              "(an hour each) and every random token was checked with the service, up to the total budget; and junk "
              "`POST /token` from the person's address spent its budget, so the real refresh got 429. Now HAProxy "
              "replaces the header with the address it saw, so the flood is one address: 10 registrations a "
              "minute (60 in total for every address), 200 token checks; a refresh carrying a live refresh token "
              "spends nothing, so it goes through whatever the junk. Redis bytes: what the keys hold (`MEMORY "
              "USAGE`), registrations and budgets; Redis keys after: everything, the pacing keys of the checked "
              "tokens included."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a tree (its src/ and manifests/) to measure as well, first")
    parser.add_argument("--registrations", type=int, default=2000, help="registrations sent (default 2000)")
    parser.add_argument("--junk", type=int, default=600, help="junk token requests and random tokens (default 600)")
    parser.add_argument("--write", type=Path, help="rewrite this section of the given markdown file")
    args = parser.parse_args(argv)
    config = SandboxConfig(tokens=(PERSON,), rate_limits=parse_rate_limits(RATE_LIMITS))
    rows: dict[str, Figures] = {}
    with SandboxServer(config) as sandbox:
        if args.before:
            rows["before"] = measure(sandbox, args.before, args.registrations, args.junk)
        rows["this tree"] = measure(sandbox, None, args.registrations, args.junk)
    publish(report(rows, args.registrations, args.junk, argv), args.write)


if __name__ == "__main__":
    sys.exit(main())
