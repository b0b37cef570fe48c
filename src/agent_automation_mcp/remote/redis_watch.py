"""A replica's look at Redis every `WATCH_SECONDS`, whatever requests come: whether Redis lost its data, and how far
this replica's clock is from Redis'.

Lost data: the marker of Redis' data (`pacing/epoch.lua`, the one the pacing ledger keeps) is set once by the first
replica to reach Redis, and is gone when Redis comes back empty (a restart without persistence, a failover to an
empty copy, a flush). A replica that finds another marker than the one it saw last counts it
(`agent_automation_redis_data_lost_total`, which `AgentAutomationRedisDataLost` reads) and tells whoever keeps what
Redis should hold (the sign-ins' ends, `oauth/ends.py`), which give it back. Each look also lets them exchange what
changed (`Listener`).

The clock: Redis' `TIME`, read in the same round trip, against this replica's clock at the middle of the trip
(`agent_automation_clock_offset_seconds`; `AgentAutomationClockOffset`). Our tokens' expiry is judged by the replica's
clock with a minute to spare (`oauth/tokens.py`), so a replica further off refuses what the others issued.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from importlib.resources import files
from typing import TYPE_CHECKING, Final

import anyio

from ..caching import MARKER_KEY, RedisAway, SharedStore
from .metrics import Metrics

if TYPE_CHECKING:
    from redis.asyncio import Redis

logger = logging.getLogger(__name__)

WATCH_SECONDS: Final = 5.0
OFFSET_WARNING_SECONDS: Final = 30.0  # half the tokens' leeway: logged (once, until it is back within) past this
EPOCH: Final = files("agent_automation_mcp.pacing").joinpath("epoch.lua").read_text()

# Called after each look that reached Redis, with whether Redis had lost its data since the last one; each handles
# Redis failing it on its own.
Listener = Callable[[bool], Awaitable[None]]


class RedisWatch:
    def __init__(self, shared: SharedStore, metrics: Metrics) -> None:
        self.shared = shared
        self.metrics = metrics
        self.listeners: list[Listener] = []
        self._marker: bytes | None = None
        self._epoch = shared.redis.register_script(EPOCH) if shared.redis is not None else None
        self._off = False

    async def run(self) -> None:
        """Look every `WATCH_SECONDS` until cancelled (the app's lifespan runs it)."""
        if self._epoch is None:
            return
        while True:
            await self.look()
            await anyio.sleep(WATCH_SECONDS)

    async def look(self) -> None:
        """One look: the marker and the clock, then the listeners; nothing while Redis does not answer."""
        epoch = self._epoch
        assert epoch is not None

        async def read(redis: Redis) -> tuple[bytes, float]:
            async with redis.pipeline(transaction=False) as pipe:
                await epoch(keys=[MARKER_KEY], args=[uuid.uuid4().hex], client=pipe)
                pipe.time()
                sent = time.time()
                marker, (seconds, micros) = await pipe.execute()
                return marker, (sent + time.time()) / 2 - (seconds + micros / 1_000_000)

        try:
            marker, offset = await self.shared.ask(read)
        except RedisAway:
            return
        lost = self._marker is not None and marker != self._marker
        self._marker = marker
        self._clock(offset)
        if lost:
            self.metrics.redis_lost_data()
            logger.error("Redis has lost its data (restarted empty, or another copy took over): this replica gives "
                         "back the sign-ins' ends it holds; sign-ins that only a stopped replica knew ended work again "
                         "(AGENT_AUTOMATION_OAUTH_ENDED_BEFORE ends every one made before a time)")
        for listener in self.listeners:
            await listener(lost)

    def _clock(self, offset: float) -> None:
        self.metrics.clock_offset.set(offset)
        off = abs(offset) > OFFSET_WARNING_SECONDS
        if off and not self._off:
            logger.warning("this replica's clock is %.0f s %s Redis': sign-in tokens expire a minute late or early "
                           "everywhere, so past that this replica refuses what others issue; synchronise its clock "
                           "(NTP)", abs(offset), "ahead of" if offset > 0 else "behind")
        self._off = off
