"""Redis lost under load and back again, empty or with its data: replicas sharing one token against the sandbox
send no request the service refuses, fail no call, and are back on the shared limit within moments. Windows are
scaled down thirty-fold so the whole outage takes seconds.

Replicas, sandbox and callers share this one process, which a busy machine may leave waiting for a CPU: the
throughput asked of each phase is over the time the process was not kept waiting (`Mark.ran_until`); a 429 fails
the test only where every send of its window was answered within the margin of its charge, which pacing assumes
of the service (`Sends.excuse`); and Redis stays down until each replica's readiness check has found it unreachable
(`down_until_each_finds_it`). So none assumes the CPU the test asks for."""

from __future__ import annotations

import logging
import math
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
import httpx2
import pytest

from agent_automation_mcp.api import AgentAutomationClient, ApiTransport, Credentials
from agent_automation_mcp.api.errors import ApiError, RateLimitError
from agent_automation_mcp.api.limits import DEFAULT_RATE_LIMITS, STANDARD, RateLimit
from agent_automation_mcp.api.pacer import Pacer, Receipt, StoreState
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.pacing import create_pacer, redis_ledger
from agent_automation_mcp.redis_pool import REDIS_TIMEOUT
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.sandbox.state import RequestRecord
from schedstat import Mark

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
        answered, stopped = 0, False

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
        sends = Sends(settings.rate_margin)
        transports = [ApiTransport(settings, sends.timing(pacer)) for pacer in pacers]
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

    refused = [r.time for r in log if r.status == 429]
    assert [(round(t - down.at, 3), round(t - up.at, 3)) for t in refused if not sends.excuse(t, LIMITS[STANDARD])] \
        == [], f"{len(refused)} refused; {len(sends.late())} sends answered later than the margin after their charge"
    assert failed == []
    # It did run through the outage and back: every replica fell back, and calls went on in each phase.
    # (At least: on a busy machine a Redis round trip may also time out once more, later.)
    messages = [r.getMessage() for r in caplog.records]
    assert all(sum(said in m for m in messages) >= REPLICAS for said in ("unreachable", "reachable again"))
    if keeps_data:  # never taken for a Redis that lost it, however late its answers come
        assert [m for m in messages if "lost recent sends" in m] == []
    assert_paced_in_each_phase(log, (started, down, up, back, end), settings.rate_margin,
                               long=outage > 2 * LIMITS[STANDARD].window)
    assert answered == len(log)


def assert_paced_in_each_phase(log: Sequence[RequestRecord], marks: tuple[Mark, Mark, Mark, Mark, Mark],
                               margin: float, *, long: bool) -> None:
    """Calls went on before the outage, and soon after Redis is back at the shared limit again (over half of it,
    where the replicas together had half: a sliding log allows count per window + margin, in bursts); during a
    `long` one (over two windows), at each replica's share. Each over the time the process got to run in."""
    started, down, up, back, end = marks
    standard = LIMITS[STANDARD]

    def sent_and_ran(start: Mark, stop: Mark) -> tuple[int, float, str]:
        sent = sum(1 for r in log if start.at <= r.time < stop.at)
        ran = start.ran_until(stop)
        return sent, ran, (f"{sent} sends from {start.at - started.at:.2f}s to {stop.at - started.at:.2f}s, "
                           f"{stop.at - start.at - ran:.2f}s of it waiting for a CPU")

    for start, stop, share in ((started, down, 0.5), (back, end, 0.55)):
        sent, ran, said = sent_and_ran(start, stop)
        assert sent >= share * standard.count * ran / standard.window, said
    if long:
        # Once the window in which it lost Redis has passed, a burst of count // MAX_REPLICAS sends per window and
        # margin. So over whole periods only, less the first.
        period = standard.window + margin
        sent, ran, said = sent_and_ran(down, up)
        assert sent >= REPLICAS * (standard.count // MAX_REPLICAS) * math.floor(ran / period - 1), said


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


@dataclass
class Sends:
    """When each send was charged and when its answer came (wall clock, as the sandbox's log), across replicas.

    Pacing holds each send's bound at its charge plus the margin, lowered to its answer: the service stamps a request
    before it answers, and, pacing assumes, within the margin of its charge. A process kept waiting for a CPU between
    a charge and its send (or the sandbox's thread, between a request and its stamp) breaks that, and only then can a
    sliding-log service refuse a send of a pacer that keeps its rule.
    """

    margin: float
    answered: list[tuple[float, float]] = field(default_factory=list)
    out: dict[Receipt, float] = field(default_factory=dict)  # charged, not yet answered
    offset: float = field(default_factory=lambda: time.time() - time.monotonic())  # local bounds: monotonic

    def timing(self, pacer: Pacer) -> Pacer:
        return _Timed(pacer, self)

    def charged(self, receipt: Receipt) -> None:
        bound = receipt.shared / 1e6 if receipt.shared is not None else (receipt.local or 0.0) + self.offset
        self.out[receipt] = bound - self.margin

    def settled(self, receipt: Receipt) -> None:
        self.answered.append((self.out.pop(receipt), time.time()))

    def late(self) -> list[tuple[float, float]]:
        """Sends whose answer came later than the margin after their charge, or never (each as charge, answer)."""
        return [(charged, answer) for charged, answer in [*self.answered, *((c, math.inf) for c in self.out.values())]
                if answer - charged > self.margin]

    def excuse(self, refused: float, limit: RateLimit) -> bool:
        """Whether a refusal at `refused` may come of a late send: one still unanswered past its margin within the
        window before it, which the service may then have stamped later than pacing assumed."""
        return any(charged + self.margin < refused and answer > refused - limit.window
                   for charged, answer in self.late())


@dataclass
class _Timed:
    """A replica's pacer, telling `Sends` of each charge and answer."""

    inner: Pacer
    sends: Sends

    async def acquire(self, token_key: str, buckets: Sequence[str], deadline: float | None, *,
                      bulk: bool = False) -> Receipt:
        receipt = await self.inner.acquire(token_key, buckets, deadline, bulk=bulk)
        self.sends.charged(receipt)
        return receipt

    async def settled(self, receipt: Receipt, status: int | None) -> None:
        self.sends.settled(receipt)
        await self.inner.settled(receipt, status)

    async def rate_limited(self, token_key: str, buckets: Sequence[str], retry_after: float | None) -> float:
        return await self.inner.rate_limited(token_key, buckets, retry_after)

    async def store_state(self) -> StoreState | None:
        return await self.inner.store_state()

    async def aclose(self) -> None:
        await self.inner.aclose()


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
