"""Redis lost under load and back again, empty or with its data: replicas sharing one token against the sandbox
send no request the service refuses, fail no call, and are back on the shared limit within moments. Windows are
scaled down thirty-fold so the whole outage takes seconds.

Replicas, sandbox and callers share this one process, which a busy machine may leave waiting for a CPU: the
throughput asked of each phase is over the time the process was not kept waiting (`Mark.ran_until`), and Redis
stays down until each replica's readiness check has found it unreachable (`down_until_each_finds_it`), so neither
assumes the CPU the test asks for."""

from __future__ import annotations

import logging
import math
import signal
import time
from dataclasses import dataclass, field

import anyio
import httpx2
import pytest

from agent_automation_mcp.api import AgentAutomationClient, ApiTransport, Credentials
from agent_automation_mcp.api.errors import ApiError, RateLimitError
from agent_automation_mcp.api.limits import DEFAULT_RATE_LIMITS, STANDARD, RateLimit
from agent_automation_mcp.api.pacer import Pacer
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.pacing import create_pacer, redis_ledger
from agent_automation_mcp.redis_pool import REDIS_TIMEOUT
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from schedstat import waited_since, waiting_for_cpu

from .redis_server import RedisServer

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

LIMITS = {name: RateLimit(max(3, limit.count // 6), limit.window / 30) for name, limit in DEFAULT_RATE_LIMITS.items()}
REPLICAS = 3
MAX_REPLICAS = 2 * REPLICAS  # the autoscaler's bound, above the replicas running: each share is a sixth
CALLERS = 3  # per replica, closed loop: always more demand than the limit allows
BEFORE, AFTER = 2.0, 3.5  # seconds
BACK = 1.5  # seconds after Redis returns by which every replica paces on the shared limit again


# A stall outlasts the Redis client's timeout (redis_pool.py), or no replica would notice it; it lasts until each has.
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

        pacers = [create_pacer(settings) for _ in range(REPLICAS)]
        transports = [ApiTransport(settings, pacer) for pacer in pacers]
        clients = [AgentAutomationClient(t, Credentials(sandbox.token, sandbox.org_id)) for t in transports]
        started = Mark()
        # Stopped, not cancelled: a call cancelled after its request reached the service would be sent, unanswered.
        with anyio.fail_after(BEFORE + outage + AFTER + 30):
            async with anyio.create_task_group() as tg:
                for client in clients:
                    for _ in range(CALLERS):
                        tg.start_soon(caller, client)
                await anyio.sleep(BEFORE)
                down = Mark()
                await down_until_each_finds_it(own_redis_server, pacers, outage, keeps_data=keeps_data)
                up = Mark()
                await anyio.sleep(BACK)
                back = Mark()
                await anyio.sleep(AFTER - BACK)
                stopped = True
                end = Mark()
        for transport in transports:
            await transport.aclose()
        log = [r for r in sandbox.request_log if r.operation == "get_agent_run"]

    assert [(round(r.time - down.at, 3), round(r.time - up.at, 3)) for r in log if r.status == 429] == []
    assert failed == []
    # It did run through the outage and back: every replica fell back, and calls went on in each phase.
    # (At least: on a busy machine a Redis round trip may also time out once more, later.)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("unreachable" in m for m in messages) >= REPLICAS
    assert sum("reachable again" in m for m in messages) >= REPLICAS
    if keeps_data:  # never taken for a Redis that lost it, however late its answers come
        assert [m for m in messages if "lost recent sends" in m] == []
    standard = LIMITS[STANDARD]

    def sent_and_ran(start: Mark, stop: Mark) -> tuple[int, float, str]:
        sent = sum(1 for r in log if start.at <= r.time < stop.at)
        ran = start.ran_until(stop)
        return sent, ran, (f"{sent} sends from {start.at - started.at:.2f}s to {stop.at - started.at:.2f}s, "
                           f"{stop.at - start.at - ran:.2f}s of it waiting for a CPU")

    # Calls went on before the outage, and soon after Redis is back at the shared limit again (over half of it,
    # where the replicas together had half: a sliding log allows count per window + margin, in bursts). Each over
    # the time the process got to run in.
    for start, stop, share in ((started, down, 0.5), (back, end, 0.55)):
        sent, ran, said = sent_and_ran(start, stop)
        assert sent >= share * standard.count * ran / standard.window, said
    if outage > 2 * standard.window:
        # And during a long one, at each replica's share: once the shared sends it last heard of have left the
        # window, a burst of count // MAX_REPLICAS sends per window and margin. So over whole periods only.
        period = standard.window + settings.rate_margin
        sent, ran, said = sent_and_ran(down, up)
        assert sent >= REPLICAS * (standard.count // MAX_REPLICAS) * math.floor(ran / period - 1), said
    assert answered == len(log)


async def test_replicas_cut_off_send_nothing_the_service_refuses_whatever_they_last_saw(
        own_redis_server: RedisServer) -> None:
    """Each replica saw a different part of the window before Redis was killed: one saw 1 send of 6, one all 6, one
    none (it never sent on the token). Each may have been the last to hear of it, so none may send on the room it
    saw free: 1 + 2 requests the service refused before (a third of the 5 or the 6 free), none now."""
    limits = {name: RateLimit(6, 10.0) for name in DEFAULT_RATE_LIMITS}
    with SandboxServer(SandboxConfig(rate_limits=limits, algorithm="sliding-log", seed=13)) as sandbox:
        run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={}).json()["id"]
        settings = ApiSettings(base_url=sandbox.url, rate_limits=limits, redis_url=own_redis_server.url,
                               rate_margin=0.1, max_replicas=3)
        transports = [ApiTransport(settings, create_pacer(settings)) for _ in range(3)]
        first, busiest, idle = (AgentAutomationClient(t, Credentials(sandbox.token, sandbox.org_id))
                                for t in transports)
        for client, calls in ((first, 1), (busiest, 5)):
            for _ in range(calls):
                await client.within(5).get_agent_run(run)
        own_redis_server.kill()
        refused = []
        for client in (first, busiest, idle):
            for _ in range(2):
                try:
                    await client.within(1.5).get_agent_run(run)
                except RateLimitError as exc:  # answered at once: nothing sent
                    refused.append(exc)
        for transport in transports:
            await transport.aclose()
        statuses = [r.status for r in sandbox.request_log if r.operation == "get_agent_run"]
    assert [status for status in statuses if status != 200] == []
    assert len(statuses) == 6 and len(refused) == 6


@dataclass(frozen=True)
class Mark:
    """An instant of the test, and how long each thread had waited for a CPU by then."""

    at: float = field(default_factory=time.time)
    waited: dict[str, int] = field(default_factory=waiting_for_cpu)

    def ran_until(self, stop: Mark) -> float:
        """Seconds from here to `stop` less the time the threads waited for a CPU, summed: the calls need the
        event loop and the sandbox's thread by turns, so a wait of either holds them up. Without schedstat, the
        whole time: the full throughput of every second is asked."""
        return stop.at - self.at - sum(waited_since(self.waited, stop.waited))


async def down_until_each_finds_it(server: RedisServer, pacers: list[Pacer], at_least: float, *,
                                   keeps_data: bool) -> None:
    """Take Redis away for `at_least` seconds and until each replica's readiness check (the Deployment's probe asks
    Redis too) has found it unreachable, whether or not a call of its own went out meanwhile. Kept: redis-server is
    frozen, as on a stalled host, so a check times out, and goes on with its data; else it stops, and starts empty
    (in a worker thread: the replicas' calls go on while it does)."""
    process = server.process
    assert process is not None
    if keeps_data:
        process.send_signal(signal.SIGSTOP)
    else:
        await anyio.to_thread.run_sync(server.stop)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.sleep, at_least)
            for pacer in pacers:
                tg.start_soon(expect_unreachable, pacer)
    finally:
        if keeps_data:
            process.send_signal(signal.SIGCONT)
        else:
            await anyio.to_thread.run_sync(server.start)  # on the same port


async def expect_unreachable(pacer: Pacer) -> None:
    assert await pacer.store_state() == "unreachable"
