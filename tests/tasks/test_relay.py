"""The relay of run reads between replicas: one pattern subscription per replica, through quiet and a Redis restart."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import anyio
import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

from agent_automation_mcp.caching import SharedStore
from agent_automation_mcp.redis_pool import REDIS_TIMEOUT, redis_client
from agent_automation_mcp.tasks.notify import RunRead, RunReads
from pacing.redis_server import RedisServer, running_redis

MAX_WAITS = 200  # of 0.05 s


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


async def until(condition: Callable[[], object]) -> None:
    for _ in range(MAX_WAITS):
        if condition():
            return
        await anyio.sleep(0.05)
    raise AssertionError("not within 10 s")


async def relays(probe: Redis, count: int) -> bool:
    """Whether `count` replicas have the relay's one subscription (a pattern) in place, within 10 s."""
    for _ in range(MAX_WAITS):
        try:
            if int(await probe.execute_command("PUBSUB", "NUMPAT")) == count:
                return True
        except (ConnectionError, OSError, RedisError):  # Redis restarting
            pass
        await anyio.sleep(0.05)
    return False


@pytest.mark.anyio
async def test_the_relay_carries_other_replicas_reads_through_quiet_and_a_redis_restart(
        redis_server: RedisServer) -> None:
    here, there = SharedStore(redis_client(redis_server.url)), SharedStore(redis_client(redis_server.url))
    reads, other = RunReads(here), RunReads(there)
    heard: list[RunRead] = []
    reads.subscribe(heard.append)
    probe = redis_client(redis_server.url)
    try:
        async with reads.relaying():
            subscribed = await relays(probe, 1)
            await anyio.sleep(REDIS_TIMEOUT + 0.5)  # a quiet channel, longer than a Redis command may take
            quiet_was_fine = here.reachable() is not None
            await other.publish(RunRead(7, 1, {"status": "RUNNING"}))
            await reads.publish(RunRead(7, 2, {"status": "RUNNING"}))  # its own: heard once, not again from Redis
            await until(lambda: len(heard) >= 2)
            redis_server.stop()
            redis_server.start()
            back = await relays(probe, 1)  # the relay pauses 0.5 s, then 1 s, ... before it tries again
            await other.publish(RunRead(7, 3, {"status": "COMPLETE"}))
            await until(lambda: len(heard) >= 3)
            await anyio.sleep(0.2)  # time for a duplicate to arrive, were there one
        ended = await relays(probe, 0)
    finally:
        for store in (here, there):
            await store.aclose()
        await probe.aclose()
    assert subscribed and quiet_was_fine and back
    assert sorted(heard, key=lambda read: read.run_id) == [RunRead(7, 1, {"status": "RUNNING"}),
                                                           RunRead(7, 2, {"status": "RUNNING"}),
                                                           RunRead(7, 3, {"status": "COMPLETE"})]
    assert ended  # the relay ends with the lifespan, its subscription with it
