"""Redis lost under load and back again, empty or with its data: replicas sharing one token against the sandbox
send no request the service refuses, fail no call, and are back on the shared limit within moments. Windows are
scaled down thirty-fold so the whole outage takes seconds."""

from __future__ import annotations

import logging
import socket
import time

import anyio
import httpx2
import pytest

from agent_automation_mcp.api import AgentAutomationClient, ApiTransport, Credentials
from agent_automation_mcp.api.errors import ApiError
from agent_automation_mcp.api.limits import DEFAULT_RATE_LIMITS, STANDARD, RateLimit
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.pacing import create_pacer, redis_ledger
from agent_automation_mcp.redis_pool import REDIS_TIMEOUT
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer

from .redis_server import RedisServer

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

LIMITS = {name: RateLimit(max(3, limit.count // 6), limit.window / 30) for name, limit in DEFAULT_RATE_LIMITS.items()}
REPLICAS = 3
MAX_REPLICAS = 2 * REPLICAS  # the autoscaler's bound, above the replicas running: each share is a sixth
CALLERS = 3  # per replica, closed loop: always more demand than the limit allows
BEFORE, AFTER = 2.0, 3.5  # seconds
BACK = 1.5  # seconds after Redis returns by which every replica paces on the shared limit again


# A stall outlasts the Redis client's timeout (redis_pool.py), or no replica would notice it.
@pytest.mark.parametrize(("outage", "keeps_data"), [(3.0, False), (0.5, False), (1.5 * REDIS_TIMEOUT, True)],
                         ids=["long, back empty", "blip, back empty", "blip, back with its data"])
async def test_replicas_losing_redis_under_load_send_no_429_and_fail_no_call(
        own_redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        outage: float, keeps_data: bool) -> None:
    monkeypatch.setattr(redis_ledger, "RETRY_REDIS_AFTER", 0.2)
    caplog.set_level(logging.WARNING, logger="agent_automation_mcp.pacing")
    with SandboxServer(SandboxConfig(rate_limits=LIMITS, algorithm="sliding-log", seed=13)) as sandbox:
        run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={}).json()["id"]
        settings = ApiSettings(base_url=sandbox.url, rate_limits=LIMITS, redis_url=own_redis_server.url,
                               rate_margin=0.15, max_replicas=MAX_REPLICAS)
        failed: list[ApiError] = []
        answered = 0
        stopped = False

        async def caller(client: AgentAutomationClient) -> None:
            nonlocal answered
            for _ in range(1000):  # bounded; the load is stopped long before, each caller after its call in flight
                if stopped:
                    return
                try:
                    await client.within(10).get_agent_run(run)
                    answered += 1
                except ApiError as exc:
                    failed.append(exc)

        transports = [ApiTransport(settings, create_pacer(settings)) for _ in range(REPLICAS)]
        clients = [AgentAutomationClient(t, Credentials(sandbox.token, sandbox.org_id)) for t in transports]
        started = time.time()
        # Stopped, not cancelled: a call cancelled after its request reached the service would be sent, unanswered.
        with anyio.fail_after(BEFORE + outage + AFTER + 30):
            async with anyio.create_task_group() as tg:
                for client in clients:
                    for _ in range(CALLERS):
                        tg.start_soon(caller, client)
                await anyio.sleep(BEFORE)
                if keeps_data:  # stalled: every replica times out, then finds it as it was
                    pause_redis(own_redis_server, outage)
                else:
                    own_redis_server.stop()
                down = time.time()
                await anyio.sleep(outage)
                if not keeps_data:
                    own_redis_server.start()  # empty, on the same port
                up = time.time()
                await anyio.sleep(AFTER)
                stopped = True
        for transport in transports:
            await transport.aclose()
        log = [r for r in sandbox.request_log if r.operation == "get_agent_run"]

    assert [(round(r.time - down, 3), round(r.time - up, 3)) for r in log if r.status == 429] == []
    assert failed == []
    # It did run through the outage and back: every replica fell back, and calls went on in each phase.
    # (At least: on a busy machine a Redis round trip may also time out once more, later.)
    assert sum("unreachable" in r.getMessage() for r in caplog.records) >= REPLICAS
    assert sum("reachable again" in r.getMessage() for r in caplog.records) >= REPLICAS
    standard = LIMITS[STANDARD]
    # Calls went on before and during a long outage (at the replicas' shares, half the limit together), and soon
    # after Redis is back at the shared limit again (over half of it, where the replicas together had half: a
    # sliding log allows count per window + margin, in bursts).
    for start, end, share in ((started, down, 0.5), (down, up, 0.25 if outage > 2 * standard.window else 0),
                              (up + BACK, up + AFTER, 0.55)):
        sent = sum(1 for r in log if start <= r.time < end)
        assert sent >= share * standard.count * (end - start) / standard.window, (start - started, end - started, sent)
    assert answered == len(log)


def pause_redis(server: RedisServer, seconds: float) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=2) as sock:
        sock.sendall(f"CLIENT PAUSE {round(seconds * 1000)} ALL\r\n".encode())
        if not sock.recv(16).startswith(b"+OK"):
            raise RuntimeError("CLIENT PAUSE failed")
