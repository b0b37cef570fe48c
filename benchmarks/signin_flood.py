"""The sign-in flood: what strangers get out of 3 sign-in replicas behind HAProxy, and what is left for a colleague.

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
before and after the registrations.

Then strangers from several networks, each a loopback /24 (HAProxy passes a client's address on as the
client's): 30 random tokens pasted on the consent page from each of 40 addresses in 4 networks; 10 registrations
from each of 2 addresses in each of 6 networks, then a colleague registers from a 7th; 100 random tokens at `/mcp`
from each of 2 addresses in each of 10 networks, then a colleague's token never seen before from a fresh network
and another's from the company's egress network (`AGENT_AUTOMATION_VOUCHED_NETWORKS`); and a colleague signs in
from that network (the budgets' minute has not passed meanwhile). Loopback only; everything it starts it stops, on
error too.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import math
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
from fleet import SHARED_KEYS, ServerProcess, balancer, free_port, mcp_server, redis_server
from redis import Redis
from report import command_line, publish

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer

ROOT = Path(__file__).resolve().parent.parent
PERSON = "tok-bench-signin-person"
COLLEAGUES = tuple(f"tok-bench-signin-colleague-{i}" for i in range(3))  # never seen before the floods
NETWORK_REGISTRATIONS = (6, 2, 10)  # networks, addresses in each, registrations from each address: 120 (issue 45)
JUNK_NETWORKS = (10, 2, 100)  # networks, addresses in each, random tokens from each address: 2,000 (issue 45)
VOUCHED = "127.131.0.0/24"  # the company's egress, named in AGENT_AUTOMATION_VOUCHED_NETWORKS
PASTES = (4, 10, 30)  # networks, addresses in each, tokens pasted from each address
RATE_LIMITS = "standard=100000/30s,logs=100000/60s"  # pacing never waits: this counts requests
REPLICAS = 3
REDIRECT_URI = "http://127.0.0.1:9/callback"
LIST_CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
LIST_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}


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
    network_registrations: Counter[int] = field(default_factory=Counter)
    colleague_registration: int = 0
    network_junk: Counter[int] = field(default_factory=Counter)
    network_junk_checks: int = 0
    colleague_token: int = 0
    colleague_refusal: str = ""  # whose count the refusal of the colleague's new token names
    vouched_token: int = 0
    pastes: Counter[str] = field(default_factory=Counter)
    paste_checks: int = 0
    colleague_signin: str = ""


def spoofed() -> dict[str, str]:
    return {"x-forwarded-for": f"198.{secrets.randbelow(256)}.{secrets.randbelow(256)}.{secrets.randbelow(254) + 1}"}


async def flood(count: int, send: Any, address: str | None = None) -> tuple[Counter[int], float]:
    """`send(http)` `count` times, 50 at a time, from `address` (a loopback one; None: the default); the statuses
    and the seconds it took."""
    statuses: Counter[int] = Counter()
    limiter = anyio.CapacityLimiter(50)

    async def one(http: httpx2.AsyncClient) -> None:
        async with limiter:
            statuses[(await send(http)).status_code] += 1

    started = time.monotonic()
    transport = httpx2.AsyncHTTPTransport(local_address=address) if address else None
    async with httpx2.AsyncClient(timeout=60, transport=transport) as http, anyio.create_task_group() as group:
        for _ in range(count):
            group.start_soon(one, http)
    return statuses, time.monotonic() - started


def from_address(address: str | None) -> httpx2.Client:
    """A client on `address` (a loopback address: HAProxy sees it as the client's), or the default one."""
    transport = httpx2.HTTPTransport(local_address=address) if address else None
    return httpx2.Client(timeout=30, transport=transport)


class Refused(Exception):
    """A step of a sign-in was refused: its name and HTTP status, as the table shows them."""

    def __init__(self, step: str, status: int) -> None:
        super().__init__(f"refused at {step} ({status})")


def consent_form(http: httpx2.Client, origin: str) -> tuple[str, str, dict[str, str]]:
    """A registration, and its consent page's form: client id, PKCE verifier, the form's hidden fields."""
    registered = http.post(f"{origin}/register", json={"redirect_uris": [REDIRECT_URI],
                                                       "token_endpoint_auth_method": "none"})
    if registered.status_code != 201:
        raise Refused("registration", registered.status_code)
    client_id = registered.json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    page = http.get(f"{origin}/authorize?" + urlencode({
        "response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT_URI,
        "code_challenge": challenge, "code_challenge_method": "S256"}))
    fields = {name: unescape(value) for name, value in
              re.findall(r'<input type="hidden" name="([a-z]+)" value="([^"]*)">', page.text)}
    return client_id, verifier, fields


def sign_in(origin: str, token: str = PERSON, address: str | None = None) -> tuple[str, dict[str, Any]]:
    """A person's client id and tokens, through the consent page as a browser posts it, from `address`."""
    with from_address(address) as http:
        client_id, verifier, fields = consent_form(http, origin)
        answer = http.post(f"{origin}/authorize", data={**fields, "token": token, "action": "approve"})
        if "location" not in answer.headers:
            raise Refused("consent", answer.status_code)
        code = parse_qs(urlsplit(answer.headers["location"]).query)["code"][0]
        tokens = http.post(f"{origin}/token", data={"grant_type": "authorization_code", "code": code,
                                                    "code_verifier": verifier, "client_id": client_id,
                                                    "redirect_uri": REDIRECT_URI}).json()
    return client_id, tokens


def paste(origin: str, address: str, count: int) -> Counter[str]:
    """`count` random tokens pasted, one after another, on one consent page from `address`: how each was answered."""
    answers: Counter[str] = Counter()
    with from_address(address) as http:
        try:
            _, _, fields = consent_form(http, origin)
        except Refused:  # no page to paste into
            return Counter({"no registration": count})
        for _ in range(count):
            page = http.post(f"{origin}/authorize", data={**fields, "token": f"tok-{secrets.token_hex(12)}",
                                                          "action": "approve"})
            answers["refused by the service" if "service refused this token" in page.text else
                    "not checked (budget)" if page.status_code in (400, 429) else f"{page.status_code}"] += 1
    return answers


def list_tools(origin: str, address: str, token: str) -> httpx2.Response:
    """`tools/list` with `token`, from `address`: the answer, read."""
    with from_address(address) as http:
        return http.post(f"{origin}/mcp", json=LIST_CALL, headers=LIST_HEADERS | {"authorization": f"Bearer {token}"})


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
                "AGENT_AUTOMATION_TRUSTED_PROXIES": "127.0.0.1", "AGENT_AUTOMATION_VOUCHED_NETWORKS": VOUCHED,
                "AGENT_AUTOMATION_LOG_LEVEL": "WARNING", **SHARED_KEYS}
        replicas: list[ServerProcess] = []
        for i in range(REPLICAS):
            replicas.append(mcp_server(f"replica {i}", env, "--auth", "oauth", "--public-url", origin,
                                       "--allowed-host", f"127.0.0.1:{port}"))
            stack.callback(replicas[-1].stop)
        front = balancer(config, port, [replica.port for replica in replicas])
        stack.callback(front.stop)
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
        from_networks(figures, origin, log)
    return figures


def from_networks(figures: Figures, origin: str, log: Any) -> None:
    """The floods from several networks (each a loopback /24), and a colleague after each, from a network of their
    own."""
    asked = len(log)
    networks, addresses, pastes = PASTES
    for network in range(networks):
        for host in range(addresses):
            figures.pastes.update(paste(origin, f"127.{140 + network}.0.{host + 1}", pastes))
    figures.paste_checks = sum(1 for record in log[asked:] if record.operation == "get_current_user")
    body = {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"}
    networks, addresses, each = NETWORK_REGISTRATIONS
    for network in range(networks):
        for host in range(addresses):
            statuses, _ = anyio.run(flood, each, lambda http: http.post(f"{origin}/register", json=body),
                                    f"127.{100 + network}.0.{host + 1}")
            figures.network_registrations.update(statuses)
    with from_address("127.110.0.1") as http:
        figures.colleague_registration = http.post(f"{origin}/register", json=body).status_code
    asked = len(log)
    networks, addresses, each = JUNK_NETWORKS
    for network in range(networks):
        for host in range(addresses):
            statuses, _ = anyio.run(flood, each, lambda http: http.post(
                f"{origin}/mcp", json={}, headers={"authorization": f"Bearer tok-{secrets.token_hex(12)}"}),
                f"127.{160 + network}.0.{host + 1}")
            figures.network_junk.update(statuses)
    figures.network_junk_checks = sum(1 for record in log[asked:] if record.operation == "get_current_user")
    answer = list_tools(origin, "127.130.0.1", COLLEAGUES[0])
    figures.colleague_token = answer.status_code
    message = answer.json().get("error", {}).get("message", "") if answer.status_code == 429 else ""
    whose = re.search(r"tokens (from .*?) were checked", message)
    figures.colleague_refusal = f'"{whose[1]}"' if whose else ""
    figures.vouched_token = list_tools(origin, "127.131.0.1", COLLEAGUES[2]).status_code
    try:
        sign_in(origin, COLLEAGUES[1], "127.131.0.2")
        figures.colleague_signin = "signed in"
    except Refused as exc:
        figures.colleague_signin = str(exc)


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
    lines += ["", "HAProxy replaces any made-up `X-Forwarded-For` with the address it saw, so the flood is one "
              "address: 10 registrations a minute, and its budget of token checks (200 a minute before this issue's "
              "change, 100 now); a refresh carrying a live refresh token spends nothing, so it goes through whatever "
              "the junk. Redis bytes: what the keys hold (`MEMORY USAGE`), registrations and budgets; Redis keys "
              "after: everything, the pacing keys of the checked "
              "tokens included.",
              "",
              f"From several networks, each a loopback /24: {PASTES[2]} random tokens pasted on the consent page "
              f"from each of {PASTES[1]} addresses in each of {PASTES[0]} networks; "
              f"{NETWORK_REGISTRATIONS[2]} registrations from each of {NETWORK_REGISTRATIONS[1]} addresses in each of "
              f"{NETWORK_REGISTRATIONS[0]} networks, then a colleague's registration from a network of their own; "
              f"{JUNK_NETWORKS[2]} random tokens at `/mcp` from each of {JUNK_NETWORKS[1]} addresses in each of "
              f"{JUNK_NETWORKS[0]} networks (issue 45's 2,000 from 10 networks), then a colleague's token never seen "
              "before (`tools/list`) from a fresh network, and another's from the company's egress network "
              f"(`AGENT_AUTOMATION_VOUCHED_NETWORKS={VOUCHED}`); then a colleague's sign-in from that network. All "
              "within the same minute.",
              "",
              "| code | pasted tokens | their checks upstream | registrations | colleague's registration | random "
              "tokens at /mcp | their checks upstream | colleague's new token (refused from) | from the vouched "
              "network | colleague's sign-in |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for name, f in rows.items():
        pasted = ", ".join(f"{outcome}: {n:,}" for outcome, n in sorted(f.pastes.items()))
        lines.append(f"| {name} | {pasted} | {f.paste_checks:,} | {statuses(f.network_registrations)} | "
                     f"{f.colleague_registration} | {statuses(f.network_junk)} | {f.network_junk_checks:,} | "
                     f"{f.colleague_token}{f' ({f.colleague_refusal})' if f.colleague_refusal else ''} | "
                     f"{f.vouched_token} | {f.colleague_signin} |")
    lines += ["", f"Before, {math.prod(NETWORK_REGISTRATIONS):,} registrations from {NETWORK_REGISTRATIONS[0]} "
              "networks spent the registrations' total and refused the colleague's (a registration costs Redis "
              f"nothing now, and has no total); {math.prod(JUNK_NETWORKS):,} junk tokens from {JUNK_NETWORKS[0]} "
              "networks spent the checks' total, and a colleague's new token from any network nobody signed in from "
              "was refused, the refusal naming \"this address (or everyone)\". The total still bounds what "
              "strangers make the service see, so a fresh network's new token waits for it, and the refusal says "
              "\"from everyone\"; the company's egress networks, named in `AGENT_AUTOMATION_VOUCHED_NETWORKS`, "
              "never spend it."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a tree (its src/ and manifests/) to measure as well, first")
    parser.add_argument("--registrations", type=int, default=2000, help="registrations sent (default 2000)")
    parser.add_argument("--junk", type=int, default=600, help="junk token requests and random tokens (default 600)")
    parser.add_argument("--write", type=Path, help="rewrite this section of the given markdown file")
    args = parser.parse_args(argv)
    config = SandboxConfig(tokens=(PERSON, *COLLEAGUES), rate_limits=parse_rate_limits(RATE_LIMITS))
    rows: dict[str, Figures] = {}
    with SandboxServer(config) as sandbox:
        if args.before:
            rows["before"] = measure(sandbox, args.before, args.registrations, args.junk)
        rows["this tree"] = measure(sandbox, None, args.registrations, args.junk)
    publish(report(rows, args.registrations, args.junk, argv), args.write)


if __name__ == "__main__":
    sys.exit(main())
