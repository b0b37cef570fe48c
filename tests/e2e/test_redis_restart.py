"""After Redis restarts, the replica's one Redis pool (redis_pool.py) leaves no dead connection behind: the first
sign-in request and the first call after the restart succeed, with no 503 and no fall back to local pacing."""

from __future__ import annotations

import httpx2
from harness import SHARED_KEYS, HttpServer, clean_env, free_port
from oauth_flow import RawFlow

from agent_automation_mcp.sandbox import SandboxServer
from pacing.redis_server import running_redis


def test_the_first_registration_and_call_after_a_redis_restart_succeed(sandbox: SandboxServer) -> None:
    with running_redis() as redis:
        port = free_port()
        origin = f"http://127.0.0.1:{port}"
        env = clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_REDIS_URL=redis.url, **SHARED_KEYS)
        server = HttpServer(env, "--auth", "oauth", "--public-url", origin, "--allowed-host", f"127.0.0.1:{port}",
                            port=port)
        try:
            flow = RawFlow(origin)
            flow.register()  # the sign-in store's connection is pooled now
            assert httpx2.get(f"{origin}/readyz", timeout=10).json()["redis"] == "reachable"
            redis.stop()
            redis.start()  # same port, empty
            flow.register()  # 201, not 503 (RawFlow.register asserts it)
            assert httpx2.get(f"{origin}/readyz", timeout=10).json()["redis"] == "reachable"
        finally:
            stderr = server.stop()
    assert "unreachable" not in stderr and "Redis did not answer" not in stderr
