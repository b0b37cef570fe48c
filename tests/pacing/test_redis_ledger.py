"""The shared ledger against a real redis-server: replicas, keys, 429s seen by all, and Redis going away."""

from __future__ import annotations

import logging
import signal
import time
import uuid
from collections.abc import AsyncIterator

import anyio
import pytest
from redis.asyncio import Redis

from agent_automation_mcp import redis_pool
from agent_automation_mcp.api.credentials import Credentials
from agent_automation_mcp.api.errors import RateLimitError
from agent_automation_mcp.api.limits import RateLimit
from agent_automation_mcp.api.pacer import Receipt
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.pacing import FifoPacer, MemoryLedger, create_pacer, redis_ledger
from agent_automation_mcp.pacing.redis_ledger import RedisLedger
from agent_automation_mcp.redis_pool import REDIS_TIMEOUT, redis_client
from ports import free_port
from schedstat import Mark

from .redis_server import RedisServer

pytestmark = pytest.mark.anyio

MARGIN = 0.05


def pacer(url: str, limits: dict[str, RateLimit], *, max_replicas: int = 4, margin: float = MARGIN) -> FifoPacer:
    return FifoPacer(RedisLedger(redis_client(url), limits, margin=margin, max_replicas=max_replicas), limits)


def token() -> str:
    return uuid.uuid4().hex[:24]


@pytest.fixture
async def inspect(redis_server: RedisServer) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_server.url)
    yield client
    await client.aclose()


def most_in_any_window(times: list[float], window: float) -> int:
    times = sorted(times)
    return max((sum(1 for u in times[i:] if u < t + window) for i, t in enumerate(times)), default=0)


async def test_replicas_sharing_redis_stay_within_the_limit_together(redis_server: RedisServer) -> None:
    limit, margin = RateLimit(5, 0.4), 0.15
    replicas = [pacer(redis_server.url, {"standard": limit}, margin=margin) for _ in range(3)]
    key, granted = token(), []

    async def caller(replica: FifoPacer) -> None:
        while len(granted) < 15:
            receipt = await replica.acquire(key, ["standard"], None)
            assert receipt.shared is not None
            granted.append(receipt.shared / 1e6 - margin)  # when Redis charged it, however late this task runs

    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(caller, replicas[i % 3])
    for replica in replicas:
        await replica.aclose()
    # Three unshared pacers would let 15 through at once; together they let 5 per window.
    assert most_in_any_window(granted, limit.window) == limit.count


async def test_keys_name_a_hash_of_the_token_never_the_token(redis_server: RedisServer, inspect: Redis) -> None:
    credentials = Credentials(f"sk-secret-{uuid.uuid4().hex}")
    replica = pacer(redis_server.url, {"standard": RateLimit(5, 10), "logs": RateLimit(5, 10)})
    await replica.acquire(credentials.token_key, ["logs", "standard"], None)
    for bucket in ("logs", "standard"):
        await replica.rate_limited(credentials.token_key, [bucket], 1.0)
    await replica.aclose()

    keys = sorted(k.decode() for k in await inspect.keys(f"*{credentials.token_key}*"))
    prefix = f"aamcp:{{{credentials.token_key}}}"
    assert keys == [f"{prefix}:logs", f"{prefix}:logs:mode", f"{prefix}:standard", f"{prefix}:standard:mode"]
    assert not [k for k in await inspect.keys("*") if credentials.token.encode() in k]
    assert all(0 < ttl <= 3_600_000 for ttl in [await inspect.pttl(k) for k in keys])  # nothing stays forever


async def test_a_429_seen_by_one_replica_pauses_every_replica(redis_server: RedisServer) -> None:
    limits = {"standard": RateLimit(5, 10)}
    first, second = pacer(redis_server.url, limits), pacer(redis_server.url, limits)
    key = token()
    await first.acquire(key, ["standard"], None)
    assert await first.rate_limited(key, ["standard"], 3.0) == pytest.approx(3.0, abs=0.01)
    with pytest.raises(RateLimitError) as caught:
        await second.acquire(key, ["standard"], time.monotonic() + 1)
    assert caught.value.retry_after == pytest.approx(3.0, abs=0.1)
    await first.aclose()
    await second.aclose()


async def test_the_script_applies_the_same_rule_as_the_memory_ledger(redis_server: RedisServer) -> None:
    limits = {"standard": RateLimit(4, 10), "logs": RateLimit(3, 20)}
    shared = RedisLedger(redis_client(redis_server.url), limits, margin=MARGIN, max_replicas=4)
    local = MemoryLedger(limits, margin=MARGIN)
    key = token()
    for ledger in (shared, local):
        receipt = await ledger.charge(key, ["standard"], bulk=True)
        assert isinstance(receipt, Receipt)
        await ledger.settle(receipt, "admitted")  # answered at once: freed a window from now, not now + margin
        assert isinstance(await ledger.charge(key, ["logs", "standard"], bulk=False), Receipt)
        assert isinstance(await ledger.charge(key, ["logs", "standard"], bulk=False), Receipt)
        assert await ledger.charge(key, ["standard"], bulk=True) > 0  # bulk may fill 3 of 4
        assert isinstance(await ledger.charge(key, ["standard"], bulk=False), Receipt)
        assert await ledger.charge(key, ["logs", "standard"], bulk=False) > 0  # all or nothing
    for ahead in range(6):
        for bulk in (False, True):
            expected = await local.estimate(key, ["logs", "standard"], bulk=bulk, ahead=ahead)
            got = await shared.estimate(key, ["logs", "standard"], bulk=bulk, ahead=ahead)
            assert got == pytest.approx(expected, abs=0.05), (ahead, bulk)
    await local.penalise(key, ["standard"], 2.0)
    await shared.penalise(key, ["standard"], 2.0)
    for ahead in range(3):  # now evenly spaced after the log frees
        expected = await local.estimate(key, ["standard"], bulk=False, ahead=ahead)
        assert await shared.estimate(key, ["standard"], bulk=False, ahead=ahead) == pytest.approx(expected, abs=0.05)
    await shared.aclose()


async def test_a_cancelled_waiter_is_never_charged(redis_server: RedisServer, inspect: Redis) -> None:
    replica, key = pacer(redis_server.url, {"standard": RateLimit(2, 0.5)}), token()
    await replica.acquire(key, ["standard"], None)
    await replica.acquire(key, ["standard"], None)
    with anyio.move_on_after(0.1):
        await replica.acquire(key, ["standard"], None)
    assert await inspect.llen(f"aamcp:{{{key}}}:standard") == 2
    assert replica._queues == {}
    await replica.aclose()


async def test_without_redis_a_replica_waits_out_the_window_the_others_may_have_filled_then_sends_its_share(
        own_redis_server: RedisServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redis_ledger, "RETRY_REDIS_AFTER", 0.05)
    caplog.set_level(logging.INFO, logger="agent_automation_mcp.pacing")
    window = 2.0  # what a busy machine may hold the test up for between two sends, and more
    limits, key = {"standard": RateLimit(8, window)}, token()
    other, replica = pacer(own_redis_server.url, limits, max_replicas=4), pacer(own_redis_server.url, limits)
    for shared in (other, other, replica, replica):
        await shared.acquire(key, ["standard"], None)
    await other.aclose()
    own_redis_server.stop()

    # It saw 4 of 8 sent, but the other replica may have sent the 4 left before Redis went: nothing for a window.
    with pytest.raises(RateLimitError):
        await replica.acquire(key, ["standard"], time.monotonic() + 1)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "pacing locally until it is back" in warnings[0] and "1/4" in warnings[0]
    await anyio.sleep(window + MARGIN)
    for _ in range(2):  # then its share, 8 // 4 (a little apart: the bucket is hot)
        await replica.acquire(key, ["standard"], None)
    with pytest.raises(RateLimitError):
        await replica.acquire(key, ["standard"], time.monotonic() + 1)

    own_redis_server.start()  # an empty Redis again, on the same port
    await anyio.sleep(0.06)
    with pytest.raises(RateLimitError):  # still at its share for a moment, while other replicas come back
        await replica.acquire(key, ["standard"], time.monotonic() + 1)
    assert replica.ledger.degraded and "reachable again" in caplog.records[-1].getMessage()
    async with Redis.from_url(own_redis_server.url) as inspect:  # Redis came back empty: all this replica sent in
        assert await inspect.llen(f"aamcp:{{{key}}}:standard") == 4  # the last two windows was carried into it
    await replica.aclose()


async def test_a_replica_that_never_reached_redis_answers_at_once(caplog: pytest.LogCaptureFixture) -> None:
    """Not held for Redis' timeout; and it sends nothing at first, as other replicas may be using the limit."""
    replica = create_pacer(ApiSettings(redis_url=f"redis://127.0.0.1:{free_port()}/0", rate_margin=MARGIN))
    assert isinstance(replica.ledger, RedisLedger)
    started = Mark()
    with pytest.raises(RateLimitError):
        await replica.acquire(token(), ["standard"], time.monotonic() + 1)
    assert started.ran_until(Mark()) < 1  # of the time this process got to run
    assert replica.ledger.degraded and "unreachable" in caplog.text
    await replica.aclose()


async def test_sends_made_while_cut_off_are_merged_into_a_redis_that_kept_its_log(
        redis_server: RedisServer, inspect: Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    window = 2.0  # cut off for longer than a window and the margin, so that local sends go
    monkeypatch.setattr(redis_ledger, "RETRY_REDIS_AFTER", window + 0.6)  # not tried again while it is paused
    replica, key = pacer(redis_server.url, {"standard": RateLimit(20, window)}, max_replicas=2), token()
    for _ in range(4):
        await replica.acquire(key, ["standard"], None)
    # Stalled past the client's timeout, not restarted: the log stays.
    await inspect.execute_command("CLIENT", "PAUSE", round((REDIS_TIMEOUT + window + 0.5) * 1000), "ALL")
    for _ in range(3):  # the first times out on Redis, and all three go at this replica's share a window later
        assert (await replica.acquire(key, ["standard"], None)).shared is None
    assert replica.ledger.degraded
    await anyio.sleep(0.7)  # past the pause and the retry time
    await replica.acquire(key, ["standard"], None)  # Redis again: the three are carried in, then this one

    stamps = [int(s) for s in await inspect.lrange(f"aamcp:{{{key}}}:standard", 0, -1)]
    assert len(stamps) >= 4 and stamps == sorted(stamps, reverse=True)  # merged in time order, newest first
    await replica.aclose()


async def test_many_tenants_at_once_wait_for_a_connection_rather_than_leave_redis(redis_server: RedisServer) -> None:
    """More calls in flight than the pool has connections (200 tenants on one replica) stay shared."""
    ledger = RedisLedger(redis_client(redis_server.url), {"standard": RateLimit(60, 30.0)}, margin=MARGIN,
                         max_replicas=4)
    charged: list[Receipt | float] = []

    async def tenant() -> None:
        charged.append(await ledger.charge(token(), ["standard"], bulk=False))

    try:
        async with anyio.create_task_group() as tg:
            for _ in range(128):  # past redis-py's default pool of 100 and four times ours
                tg.start_soon(tenant)
        assert not ledger.degraded
        assert all(isinstance(receipt, Receipt) for receipt in charged) and len(charged) == 128
    finally:
        await ledger.aclose()


async def test_one_replica_carries_its_sends_back_once_however_many_calls_find_redis_back(
        own_redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls that find Redis due again while another is still carrying the sends made meanwhile stay local."""
    monkeypatch.setattr(redis_ledger, "RETRY_REDIS_AFTER", 0.0)  # Redis is tried again at once: every call finds it due
    window = 0.2
    ledger = RedisLedger(redis_client(own_redis_server.url), {"standard": RateLimit(1000, window)}, margin=MARGIN,
                         max_replicas=4)
    tokens = [token() for _ in range(40)]
    try:
        own_redis_server.stop()
        assert not isinstance(await ledger.charge(tokens[0], ["standard"], bulk=False), Receipt)  # Redis lost
        await anyio.sleep(window + MARGIN)  # the window the others may have filled
        for key in tokens:  # all are charged locally and wait to be carried
            assert isinstance(await ledger.charge(key, ["standard"], bulk=False), Receipt)
        own_redis_server.start()
        async def charge(key: str) -> None:
            await ledger.charge(key, ["standard"], bulk=False)

        async with anyio.create_task_group() as tg:
            for key in tokens:
                tg.start_soon(charge, key)
        assert not await ledger.estimate(tokens[0], ["standard"], bulk=False, ahead=0)
    finally:
        await ledger.aclose()


async def test_a_send_answered_is_settled_in_redis_at_its_answer_and_the_log_stays_in_order(
        redis_server: RedisServer, inspect: Redis) -> None:
    margin = 50.0  # far above a loopback round trip, or a busy machine's hold-up: every settle lowers its bound
    ledger = RedisLedger(redis_client(redis_server.url), {"standard": RateLimit(5, 100)}, margin=margin,
                         max_replicas=4)
    key = token()
    log = f"aamcp:{{{key}}}:standard"
    receipts = [await ledger.charge(key, ["standard"], bulk=False) for _ in range(3)]
    assert all(isinstance(r, Receipt) and r.shared is not None and r.local is None for r in receipts)
    shared = [r.shared for r in receipts if isinstance(r, Receipt)]
    assert [int(b) for b in await inspect.lrange(log, 0, -1)] == shared[::-1]  # bounds, largest first
    departed = int(await inspect.hget(f"{log}:mode", "last"))
    assert departed == shared[-1] - round(margin * 1_000_000)  # the newest departure, kept apart

    await ledger.settle(receipts[2], "admitted")  # the newest, answered first
    await ledger.settle(receipts[1], "unanswered")  # no answer: keeps its bound
    bounds = [int(b) for b in await inspect.lrange(log, 0, -1)]
    assert bounds == sorted(bounds, reverse=True)
    assert bounds[0] == shared[1]
    assert departed <= bounds[2] < shared[0]  # settled: between its departure and departure + margin
    # The 3 logged and 2 more fill the 5: the next waits for the settled bound to leave the window (about 100 s),
    # not for departure + margin (about 150 s).
    assert 90 < await ledger.estimate(key, ["standard"], bulk=False, ahead=2) < 101
    await ledger.aclose()


async def test_settle_never_raises_when_redis_is_gone(own_redis_server: RedisServer,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="agent_automation_mcp.pacing")
    ledger, key = RedisLedger(redis_client(own_redis_server.url), {"standard": RateLimit(5, 10)}, margin=MARGIN,
                              max_replicas=4), token()
    receipt = await ledger.charge(key, ["standard"], bulk=False)
    assert isinstance(receipt, Receipt)
    own_redis_server.stop()
    await ledger.settle(receipt, "admitted")
    assert "could not settle a send in Redis" in caplog.text
    await ledger.aclose()


async def test_replicas_share_the_probe_after_a_429(redis_server: RedisServer, inspect: Redis) -> None:
    limits = {"standard": RateLimit(50, 1.0)}  # spaced 20 ms apart after a 429
    first, second = (RedisLedger(redis_client(redis_server.url), limits, margin=MARGIN, max_replicas=4)
                     for _ in range(2))
    key = token()
    mode = f"aamcp:{{{key}}}:standard:mode"
    await first.penalise(key, ["standard"], 1.0)
    await anyio.sleep(1.05)  # the pause
    probe = await first.charge(key, ["standard"], bulk=False)
    assert isinstance(probe, Receipt)
    assert int(await inspect.hget(mode, "probe")) == probe.shared
    for _ in range(3):  # however often the other replica looks, it waits for the probe's answer
        wait = await second.charge(key, ["standard"], bulk=False)
        assert isinstance(wait, float) and 0 < wait <= 0.021
        await anyio.sleep(wait)
    await first.settle(probe, "admitted")
    assert await inspect.hmget(mode, "probing", "probe", "probe_until") == [None, None, None]
    with anyio.fail_after(1):
        while not isinstance(wait := await second.charge(key, ["standard"], bulk=False), Receipt):
            await anyio.sleep(wait)
    await first.aclose()
    await second.aclose()


async def output_bytes(inspect: Redis) -> int:
    return int((await inspect.info("stats"))["total_net_output_bytes"])


async def test_an_acquire_answers_in_a_few_bytes_however_long_the_log(redis_server: RedisServer,
                                                                      inspect: Redis) -> None:
    """One small reply per acquire (send now, or the wait), not each bucket's log for the replica to parse."""
    limits = {"standard": RateLimit(1000, 30), "logs": RateLimit(1000, 60)}
    ledger, key = RedisLedger(redis_client(redis_server.url), limits, margin=MARGIN, max_replicas=4), token()
    for _ in range(400):
        assert isinstance(await ledger.charge(key, ["logs", "standard"], bulk=False), Receipt)
    before = await output_bytes(inspect)
    info = await output_bytes(inspect) - before  # what asking for the figure costs by itself
    before = await output_bytes(inspect)
    assert isinstance(await ledger.charge(key, ["logs", "standard"], bulk=False), Receipt)
    reply = await output_bytes(inspect) - before - info
    assert reply < 100, reply  # the whole logs would be 2 x 400 bounds of about 20 bytes each
    await ledger.aclose()


async def test_a_log_keeps_no_bound_older_than_two_windows(redis_server: RedisServer, inspect: Redis) -> None:
    """Bounded by time, not only by the limit: a large limit's log holds the sends of its last two windows."""
    ledger, key = RedisLedger(redis_client(redis_server.url), {"standard": RateLimit(1000, 0.1)}, margin=MARGIN,
                              max_replicas=4), token()
    for _ in range(20):
        await ledger.charge(key, ["standard"], bulk=False)
    await anyio.sleep(0.3)  # past two windows and the margin
    await ledger.charge(key, ["standard"], bulk=False)
    assert await inspect.llen(f"aamcp:{{{key}}}:standard") == 1
    await ledger.aclose()


@pytest.mark.parametrize("keeps_data", [True, False], ids=["with its data", "empty"])
async def test_after_redis_returns_a_replica_is_back_on_the_shared_limit_within_seconds(
        own_redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, keeps_data: bool) -> None:
    monkeypatch.setattr(redis_ledger, "RETRY_REDIS_AFTER", 0.1)
    limits = {"standard": RateLimit(20, 30), "logs": RateLimit(60, 60)}  # the longest window held a replica back
    replica, key = RedisLedger(redis_client(own_redis_server.url), limits, margin=MARGIN, max_replicas=4), token()
    for _ in range(4):
        assert isinstance(await replica.charge(key, ["standard"], bulk=False), Receipt)
    async with Redis.from_url(own_redis_server.url) as control:
        if keeps_data:
            # stalled past the client timeout, then back as it was
            # stalled past the client's timeout (by a second: the call may leave late), then back as it was
            await control.execute_command("CLIENT", "PAUSE", round(REDIS_TIMEOUT * 2000), "ALL")
        else:
            own_redis_server.stop()
    assert not isinstance(await replica.charge(key, ["standard"], bulk=False), Receipt)  # the others may have sent
    assert replica.degraded
    if not keeps_data:
        own_redis_server.start()
    await anyio.sleep(REDIS_TIMEOUT + 0.05)  # past the pause, and the retry time
    await replica.estimate(key, ["standard"], bulk=False, ahead=0)  # finds Redis back
    await anyio.sleep((redis_ledger.REJOIN_TRIES + 1) * redis_ledger.RETRY_REDIS_AFTER)
    # The shared limit again, not 1/4 of it: 20 less the 4 sent, which Redis holds whether it kept its data or not.
    charged = [await replica.charge(key, ["standard"], bulk=False) for _ in range(17)]
    assert [isinstance(c, Receipt) for c in charged] == [True] * 16 + [False]
    assert not replica.degraded
    await replica.aclose()


async def test_a_redis_back_with_its_data_within_a_window_paces_alone_again_at_once(
        own_redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Cut off for less than a window, no replica can have sent without Redis (each waits out the window in which it
    lost it), so a Redis that kept its data holds every send: no grace at the local share, which a Redis back empty
    needs while the replicas carry their sends back (8 s with the defaults). The call that timed out is run by Redis
    once it goes on, and is not taken for lost data."""
    monkeypatch.setattr(redis_ledger, "RETRY_REDIS_AFTER", 0.1)
    caplog.set_level(logging.WARNING, logger="agent_automation_mcp.pacing")
    replica, key = RedisLedger(redis_client(own_redis_server.url), {"standard": RateLimit(20, 30)}, margin=MARGIN,
                               max_replicas=4), token()
    process = own_redis_server.process
    assert process is not None
    try:
        for _ in range(4):
            assert isinstance(await replica.charge(key, ["standard"], bulk=False), Receipt)
        process.send_signal(signal.SIGSTOP)  # stalled past the client's timeout, then back as it was
        try:
            assert not isinstance(await replica.charge(key, ["standard"], bulk=False), Receipt)
        finally:
            process.send_signal(signal.SIGCONT)
        await anyio.sleep(0.15)  # Redis is due again
        charged = await replica.charge(key, ["standard"], bulk=False)
        assert isinstance(charged, Receipt) and charged.shared is not None and charged.local is None
        assert not replica.degraded and "through Redis again" in caplog.records[-1].getMessage()
        # The call that timed out on this side ran once Redis went on: a lost answer, not lost data.
        assert "lost recent sends" not in caplog.text
        async with Redis.from_url(own_redis_server.url) as inspect:  # the 4, that one, this one: none given back
            assert await inspect.llen(f"aamcp:{{{key}}}:standard") == 6
    finally:
        await replica.aclose()


async def test_a_redis_that_never_answered_is_told_apart_from_one_that_went_away(
        caplog: pytest.LogCaptureFixture, redis_binary: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redis_ledger, "RETRY_REDIS_AFTER", 0.05)
    caplog.set_level(logging.WARNING, logger="agent_automation_mcp.pacing")
    server = RedisServer(redis_binary)  # a port nothing listens on yet
    ledger = RedisLedger(redis_client(server.url), {"standard": RateLimit(5, 10)}, margin=MARGIN, max_replicas=4)
    try:
        assert await ledger.store_state() == "never reached"
        assert f"127.0.0.1:{server.port}" in caplog.text and "AGENT_AUTOMATION_REDIS_URL" in caplog.text
        server.start()
        await anyio.sleep(0.1)
        assert await ledger.store_state() == "reachable"
        server.stop()
        assert await ledger.store_state() == "unreachable"
    finally:
        server.stop()
        await ledger.aclose()


async def test_a_redis_restarted_empty_between_two_calls_gets_the_window_back(
        own_redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """No call saw Redis go: the first acquire after it finds fewer sends in the window than this replica made
    there, charges nothing, and the replica gives them back before it sends on the shared limit again."""
    monkeypatch.setattr(redis_ledger, "RETRY_REDIS_AFTER", 0.05)
    replica, key = RedisLedger(redis_client(own_redis_server.url), {"standard": RateLimit(6, 30)}, margin=MARGIN,
                               max_replicas=4), token()
    for _ in range(4):
        assert isinstance(await replica.charge(key, ["standard"], bulk=False), Receipt)
    own_redis_server.stop()
    own_redis_server.start()  # empty
    charged = []
    for _ in range(6):
        charged.append(await replica.charge(key, ["standard"], bulk=False))
        await anyio.sleep(0.3)  # past the grace after Redis is found back (REJOIN_TRIES x 0.05 s)
    assert [isinstance(c, Receipt) for c in charged] == [False, False, True, True, False, False]  # 4 + 2 = 6
    assert "Redis has lost recent sends" in caplog.text
    async with Redis.from_url(own_redis_server.url) as inspect:
        assert await inspect.llen(f"aamcp:{{{key}}}:standard") == 6
    await replica.aclose()


async def test_a_redis_restarted_empty_during_the_grace_is_found_out_at_the_next_call(
        own_redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """While a replica keeps its share as well after Redis came back, Redis restarts empty again, unseen. Its next
    call finds its sends missing, as outside the grace: it used to charge the empty Redis, and once the grace ended
    pace on a log that lacked every replica's sends from before."""
    monkeypatch.setattr(redis_ledger, "RETRY_REDIS_AFTER", 0.1)
    monkeypatch.setattr(redis_ledger, "REJOIN_TRIES", 30)  # a grace of 3 s: room for a restart within it
    window = 1.0
    replica, key = RedisLedger(redis_client(own_redis_server.url), {"standard": RateLimit(6, window)}, margin=MARGIN,
                               max_replicas=2), token()
    try:
        for _ in range(2):
            assert isinstance(await replica.charge(key, ["standard"], bulk=False), Receipt)
        own_redis_server.stop()
        assert not isinstance(await replica.charge(key, ["standard"], bulk=False), Receipt)
        own_redis_server.start()  # empty
        await anyio.sleep(window + MARGIN)  # the window it lost Redis in, and the retry time, have passed
        rejoined = await replica.charge(key, ["standard"], bulk=False)  # carries its 2 back, then sends
        assert isinstance(rejoined, Receipt) and rejoined.shared is not None and replica.degraded
        own_redis_server.stop()
        own_redis_server.start()  # empty again, and no call saw it go
        await anyio.sleep(0.2)  # past the hot bucket's stagger at the local share (0.08 s): the call asks Redis
        assert not isinstance(await replica.charge(key, ["standard"], bulk=False), Receipt)
        assert "Redis has lost recent sends" in caplog.text
    finally:
        await replica.aclose()


async def test_a_late_answer_from_a_redis_that_kept_its_data_is_not_taken_for_a_restart(
        own_redis_server: RedisServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call asked while a send of ours was in the window, run by Redis after it left (held up in a paused Redis
    here; a starved event loop or a wait for a connection holds it up alike), finds the log as it was."""
    caplog.set_level(logging.WARNING, logger="agent_automation_mcp.pacing")
    monkeypatch.setattr(redis_pool, "REDIS_TIMEOUT", 5.0)  # a slow answer, not Redis gone, on a busy machine too
    window, held_up = 1.0, 0.3
    replica, key = RedisLedger(redis_client(own_redis_server.url), {"standard": RateLimit(6, window)}, margin=MARGIN,
                               max_replicas=4), token()
    async with Redis.from_url(own_redis_server.url) as inspect:
        try:
            first = await replica.charge(key, ["standard"], bulk=False)
            assert isinstance(first, Receipt) and first.shared is not None
            # Ask while the first send is still well inside the window; Redis runs the call after it has left.
            await anyio.sleep(window - 3 * MARGIN)
            await inspect.execute_command("CLIENT", "PAUSE", round(held_up * 1000), "ALL")
            second = await replica.charge(key, ["standard"], bulk=False)
            assert isinstance(second, Receipt) and second.shared is not None  # charged in Redis, not locally
            assert not replica.degraded and "lost recent sends" not in caplog.text
            assert await inspect.llen(f"aamcp:{{{key}}}:standard") == 2  # nothing given back twice
        finally:
            await replica.aclose()


async def test_sends_made_while_another_call_carries_its_own_reach_redis_too(
        own_redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """While one call carries this replica's sends into a Redis that is back, other calls pace locally; a send they
    make then is carried as well, not left out of the shared log for every other replica."""
    monkeypatch.setattr(redis_ledger, "RETRY_REDIS_AFTER", 0.05)
    long_log, window = 20_000, 0.3  # carry.lua reads and rewrites a log whole: carrying into this one takes a while
    replica = RedisLedger(redis_client(own_redis_server.url), {"standard": RateLimit(2 * long_log, window)},
                          margin=MARGIN, max_replicas=4)
    slow, quick = token(), token()
    process = own_redis_server.process
    assert process is not None
    async with Redis.from_url(own_redis_server.url) as inspect:
        try:
            assert isinstance(await replica.charge(slow, ["standard"], bulk=False), Receipt)
            seconds, micros = await inspect.time()
            newest = seconds * 1_000_000 + micros
            log = f"aamcp:{{{slow}}}:standard"
            for start in range(0, long_log, 10_000):
                await inspect.rpush(log, *range(newest - start, newest - start - 10_000, -1))
            await inspect.pexpire(log, 60_000)  # kept past the outage, as a log in steady use is
            process.send_signal(signal.SIGSTOP)  # stalled past the client's timeout: the next sends are local
            try:
                assert not isinstance(await replica.charge(slow, ["standard"], bulk=False), Receipt)
                await anyio.sleep(window + MARGIN)  # the window the others may have filled before Redis went
                assert await local_send(replica, slow)
            finally:
                process.send_signal(signal.SIGCONT)
            await anyio.sleep(0.1)  # Redis is due again

            async def while_carrying() -> None:
                await anyio.sleep(0.03)  # the first call is carrying the slow token's send meanwhile (about 0.1 s)
                await replica.charge(quick, ["standard"], bulk=False)

            async with anyio.create_task_group() as tg:
                tg.start_soon(while_carrying)
                await replica.charge(slow, ["standard"], bulk=False)
            for _ in range(20):  # should a carry outlast the client's timeout on a busy machine, Redis is due again
                if await inspect.llen(f"aamcp:{{{quick}}}:standard"):
                    break
                await anyio.sleep(0.1)
                await replica.charge(slow, ["standard"], bulk=False)
            assert await inspect.llen(f"aamcp:{{{quick}}}:standard") == 1
        finally:
            await replica.aclose()


async def local_send(replica: RedisLedger, key: str) -> bool:
    """Whether a send went at once, on this replica's local share alone."""
    charged = await replica.charge(key, ["standard"], bulk=False)
    return isinstance(charged, Receipt) and charged.shared is None


async def test_a_replica_whose_calls_all_wait_on_its_share_still_carries_its_sends_when_redis_is_back(
        own_redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Its one call waits out a window on the local share, and no readiness probe asks for it: the call wakes when
    Redis is due, so its sends are in Redis within moments, before the other replicas' grace ends."""
    monkeypatch.setattr(redis_ledger, "RETRY_REDIS_AFTER", 0.1)
    caplog.set_level(logging.WARNING, logger="agent_automation_mcp.pacing")
    window = 10.0  # cut off, the local share holds a send back for about this long
    replica, key = pacer(own_redis_server.url, {"standard": RateLimit(8, window)}, max_replicas=4), token()
    log = f"aamcp:{{{key}}}:standard"
    try:
        await replica.acquire(key, ["standard"], None)  # shared
        own_redis_server.stop()
        async with anyio.create_task_group() as tg:
            tg.start_soon(replica.acquire, key, ["standard"], None)  # loses Redis, and waits out the window
            await anyio.sleep(0.3)
            own_redis_server.start()  # empty, on the same port
            async with Redis.from_url(own_redis_server.url) as inspect:
                with anyio.fail_after(window / 2):  # well before the waiting call's turn on the local share
                    while await inspect.llen(log) < 1:  # the send made before, carried back
                        await anyio.sleep(0.05)
            assert "reachable again" in caplog.text
            tg.cancel_scope.cancel()
    finally:
        await replica.aclose()
