"""The cost of the token check on the hot path: one `/mcp` request through the gate with `--auth request` (the
service token, its verdict remembered) and with `--auth oauth` (our access token: the sealed grant opened, its end
mark looked up in the store, the service token decrypted, then the same remembered verdict), with the memory store,
with Redis, and with a Redis that does not answer (the sign-in served on its seal).

    .venv/bin/python benchmarks/oauth_check.py [--requests 2000] [--rounds 7] [--write docs/benchmarks.md]

In one process: the sandbox in a thread, a private redis-server, and the gate (`remote/gate.py`) in front of an
ASGI app that answers 200 at once, so what is measured is the gate alone, called as uvicorn calls it. The
variants take turns, round by round; each figure is the median over rounds of CPU time (and wall time) per request.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from cryptography.fernet import Fernet
from fleet import free_port, redis_server
from report import command_line, publish

from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.api.transport import ApiTransport
from agent_automation_mcp.caching import SharedStore
from agent_automation_mcp.config import RemoteSettings, ServerSettings
from agent_automation_mcp.pacing import create_pacer
from agent_automation_mcp.redis_pool import redis_client
from agent_automation_mcp.remote.gate import Lifecycle, McpGate
from agent_automation_mcp.remote.hosts import HostPolicy
from agent_automation_mcp.remote.metrics import Metrics
from agent_automation_mcp.remote.oauth.signin import SignIn
from agent_automation_mcp.remote.verdicts import TokenVerdicts
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.server import build_server
from agent_automation_mcp.tools.callers import RequestCaller, ServerState

TOKEN = "tok-bench"
CALL_CPU_US = 2700  # a whole tools/call's CPU in this server ("Serving cost over HTTP" in docs/benchmarks.md)
PORT = 8000
HEADING = "## Token check per /mcp request: --auth oauth vs --auth request"


@dataclass
class Variant:
    name: str
    gate: McpGate
    token: str
    cpu_us: list[float] = field(default_factory=list)
    wall_us: list[float] = field(default_factory=list)


async def answer(scope: dict, receive: Callable[[], Awaitable[dict]], send: Callable[[dict], Awaitable[None]]) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def request(gate: McpGate, token: str) -> int:
    status = 0

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": [
        (b"host", f"127.0.0.1:{PORT}".encode()), (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", b"application/json")]}
    await gate(scope, receive, send)
    return status


async def signed_in_token(sign_in: SignIn) -> str:
    """An access token of a grant made the way a consent makes one (code, then its exchange)."""
    code = await sign_in.grants.issue_code(client_id="bench", redirect_uri="http://127.0.0.1:9/cb",
                                           code_challenge="x" * 43, scopes=[], service_token=TOKEN, org_id=1)
    pending = await sign_in.grants.pending_code(code)
    assert pending is not None
    return (await sign_in.grants.redeem(pending)).access_token


async def measure(requests: int, rounds: int, redis_url: str, sandbox: SandboxServer) -> list[Variant]:
    api = ApiSettings.from_env({"AGENT_AUTOMATION_BASE_URL": sandbox.url})
    server = build_server(api, ServerSettings(), callers=RequestCaller())
    policy = HostPolicy.build("127.0.0.1", (), ())
    lifecycle = Lifecycle(ready=True)
    remote = RemoteSettings(auth="oauth", public_url=f"http://127.0.0.1:{PORT}",
                            oauth_keys=(Fernet.generate_key().decode(),), state_keys=("k" * 64,))
    async with ApiTransport(api, create_pacer(api)) as transport:
        server.state = ServerState(transport=transport, callers=RequestCaller(), settings=server.server_settings)
        stores = {"oauth, memory store": SharedStore(), "oauth, Redis store": SharedStore(redis_client(redis_url)),
                  "oauth, Redis not answering": SharedStore(redis_client(f"redis://127.0.0.1:{free_port()}/0"))}
        verdicts = {name: TokenVerdicts() for name in stores}  # a sign-in and its gate share theirs, as served
        sign_ins = {name: SignIn.from_settings(remote, store, verdicts[name], lambda: transport, Metrics())
                    for name, store in stores.items()}
        variants = [Variant("request", McpGate(answer, server, policy, lifecycle, per_request_auth=True), TOKEN)]
        # the same keys everywhere: any variant honours it
        token = await signed_in_token(sign_ins["oauth, memory store"])
        for name, sign_in in sign_ins.items():
            gate = McpGate(answer, server, policy, lifecycle, per_request_auth=True, sign_in=sign_in,
                           verdicts=verdicts[name])
            variants.append(Variant(name, gate, token))
        for variant in variants:  # the verdict is asked of the service once, then remembered: warm it
            assert await request(variant.gate, variant.token) == 200
        for round_ in range(rounds):
            for variant in variants[round_ % len(variants):] + variants[:round_ % len(variants)]:
                cpu, wall = time.process_time(), time.perf_counter()
                for _ in range(requests):
                    await request(variant.gate, variant.token)
                variant.cpu_us.append((time.process_time() - cpu) / requests * 1e6)
                variant.wall_us.append((time.perf_counter() - wall) / requests * 1e6)
        for sign_in in sign_ins.values():
            await sign_in.close()
    return variants


def render(variants: list[Variant], command: str, load: tuple[float, float, float], requests: int,
           rounds: int) -> str:
    base = statistics.median(variants[0].cpu_us)
    rows = [f"| {v.name} | {statistics.median(v.cpu_us):.0f} µs | {statistics.median(v.wall_us):.0f} µs | "
            f"{statistics.median(v.cpu_us) / base:.2f}× | +{statistics.median(v.cpu_us) - base:.0f} µs |"
            for v in variants]
    spread = max((max(v.cpu_us) - min(v.cpu_us)) / statistics.median(v.cpu_us) for v in variants)
    shares = "; ".join(f"{v.name} adds {(statistics.median(v.cpu_us) - base) / CALL_CPU_US:.0%}" for v in variants[1:])
    return "\n".join([
        HEADING, "",
        f"Produced by `{command}` ({os.cpu_count()} cores shared with other work; 1-minute load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the start, middle and end). The gate "
        "(`remote/gate.py`) in one process in front of an ASGI app that answers at once, called as uvicorn calls "
        f"it: {requests} requests per round, {rounds} rounds with the variants taking turns, each figure the median "
        "over rounds. The token's verdict from the service is remembered in every variant (as it is for five "
        "minutes in a running server), so no variant asks the service. Redis: a local redis-server over loopback.",
        "", "| variant | CPU per request | wall per request | CPU vs request | CPU added |", "|---|---|---|---|---|",
        *rows, "",
        f"Rounds of one variant spread over at most {spread:.0%} of their median (CPU). For scale: a whole "
        f"`tools/call` costs this server about {CALL_CPU_US / 1000:.1f} ms of CPU (\"Serving cost over HTTP\" "
        f"above); against that, {shares}. The memory store's cost is opening the sealed token (AES-GCM) and the "
        "service token in it (Fernet); the Redis variant adds the Redis client's work for the one round trip (a GET "
        "of the grant's end mark). With Redis not answering (a port nothing listens on), the sign-in is served on "
        "its seal: after the first refusal Redis is not asked again for 2 s, so no request waits for it.", ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args(argv)
    load_start = os.getloadavg()[0]
    redis = redis_server()
    try:
        with SandboxServer(SandboxConfig(tokens=(TOKEN,))) as sandbox:
            load_middle: list[float] = []

            async def run() -> list[Variant]:
                variants = await measure(args.requests, args.rounds, f"redis://127.0.0.1:{redis.port}/0", sandbox)
                load_middle.append(os.getloadavg()[0])
                return variants

            variants = anyio.run(run)
    finally:
        redis.stop()
    load = (load_start, load_middle[0], os.getloadavg()[0])
    publish(render(variants, command_line("oauth_check.py", argv), load, args.requests, args.rounds), args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
