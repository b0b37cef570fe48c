"""Send logs in Redis, shared by every replica, so N replicas on one token together stay within its limits.

Each check-and-charge is one server-side script over all of a request's buckets, timed by Redis' own
clock, so replicas whose clocks disagree cannot skew a window. Keys carry the token's hash and a hash tag
(`aamcp:{<token_key>}:<bucket>`), so a token's keys share one Cluster slot and never show the token.
If Redis cannot be reached, this replica keeps serving from a local ledger at 1/max_replicas of each limit,
which stays within the limit as long as no more replicas than that run, and tries Redis again shortly.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from importlib.resources import files
from typing import Final, TypeVar

import anyio
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from ..api.limits import RateLimit
from . import sliding_log
from .memory import MemoryLedger

logger = logging.getLogger(__name__)

REDIS_TIMEOUT: Final = 0.25  # seconds; a stalled Redis must not stall every request
RETRY_REDIS_AFTER: Final = 2.0  # seconds of local pacing before Redis is tried again
KEY_PREFIX: Final = "aamcp"
_US: Final = 1_000_000
_ACQUIRE: Final = files(__package__).joinpath("acquire.lua").read_text()
_PENALISE: Final = files(__package__).joinpath("penalise.lua").read_text()
_UNREACHABLE: Final = (RedisError, OSError, TimeoutError)

T = TypeVar("T")


def degraded_limits(limits: Mapping[str, RateLimit], max_replicas: int) -> dict[str, RateLimit]:
    """Each replica's conservative share of every limit while it cannot see the others."""
    return {name: RateLimit(max(1, limit.count // max(1, max_replicas)), limit.window)
            for name, limit in limits.items()}


def bucket_keys(token_key: str, buckets: Sequence[str]) -> list[str]:
    """Per bucket its log and its mode hash; the `{...}` hash tag keeps one token's keys in one slot."""
    keys = []
    for bucket in buckets:
        log = f"{KEY_PREFIX}:{{{token_key}}}:{bucket}"
        keys += [log, f"{log}:mode"]
    return keys


class RedisLedger:
    """A `Ledger` in Redis, falling back to local pacing while Redis is unreachable."""

    def __init__(self, url: str, limits: Mapping[str, RateLimit], *, margin: float, max_replicas: int) -> None:
        self.limits = dict(limits)
        self.margin = margin
        self.local = MemoryLedger(degraded_limits(limits, max_replicas), margin=margin)
        self.max_replicas = max_replicas
        self._redis = Redis.from_url(url, socket_timeout=REDIS_TIMEOUT, socket_connect_timeout=REDIS_TIMEOUT,
                                     retry=Retry(NoBackoff(), 0))
        self._acquire = self._redis.register_script(_ACQUIRE)
        self._penalise = self._redis.register_script(_PENALISE)
        self._retry_redis_at: float | None = None  # set while degraded

    @property
    def degraded(self) -> bool:
        return self._retry_redis_at is not None

    async def charge(self, token_key: str, buckets: Sequence[str], *, bulk: bool) -> float:
        return await self._shared(lambda: self._charge(token_key, buckets, bulk),
                                  lambda: self.local.charge(token_key, buckets, bulk=bulk))

    async def estimate(self, token_key: str, buckets: Sequence[str], *, bulk: bool, ahead: int) -> float:
        async def shared() -> float:
            keys, args = bucket_keys(token_key, buckets), self._args(buckets, bulk, 0, ahead)
            _, wait = await self._acquire(keys=keys, args=args)
            return wait / _US

        return await self._shared(shared, lambda: self.local.estimate(token_key, buckets, bulk=bulk, ahead=ahead))

    async def penalise(self, token_key: str, buckets: Sequence[str], retry_after: float | None) -> float:
        async def shared() -> float:
            pause = -1 if retry_after is None else round(sliding_log.clamp_pause(retry_after) * _US)
            args = [pause, random.random(), *(round(x * _US) for x in (
                self.margin, sliding_log.SPACING_SECONDS, sliding_log.STRIKE_MEMORY, sliding_log.MIN_PAUSE,
                sliding_log.BACKOFF_CAP))]
            for bucket in buckets:
                args += [self.limits[bucket].count, round(self.limits[bucket].window * _US)]
            return await self._penalise(keys=bucket_keys(token_key, buckets), args=args) / _US

        return await self._shared(shared, lambda: self.local.penalise(token_key, buckets, retry_after))

    async def reachable(self) -> bool | None:
        try:
            return bool(await self._redis.ping())
        except _UNREACHABLE:
            return False

    async def aclose(self) -> None:
        await self._redis.aclose()
        await self.local.aclose()

    async def _charge(self, token_key: str, buckets: Sequence[str], bulk: bool) -> float:
        keys = bucket_keys(token_key, buckets)
        # Shielded: once the script has run, its answer must come back, or a cancelled caller stays charged.
        with anyio.CancelScope(shield=True):
            charged, value = await self._acquire(keys=keys, args=self._args(buckets, bulk, 1, 0))
        if not charged:
            return max(value, 1) / _US
        try:
            await anyio.lowlevel.checkpoint()  # the caller was cancelled meanwhile: give the send back
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._refund(keys[::2], value)
            raise
        return 0.0

    async def _refund(self, logs: list[str], stamp: int) -> None:
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                for log in logs:
                    pipe.lrem(log, 1, stamp)
                await pipe.execute()
        except _UNREACHABLE as exc:
            logger.debug("could not give back a cancelled send: %s", exc)

    def _args(self, buckets: Sequence[str], bulk: bool, charge: int, ahead: int) -> list[int | float]:
        args: list[int | float] = [charge, ahead, round(self.margin * _US)]
        for bucket in buckets:
            limit = self.limits[bucket]
            args += [limit.count, sliding_log.bulk_cap(limit) if bulk else limit.count, round(limit.window * _US),
                     round(sliding_log.spacing_interval(limit) * _US),
                     round(sliding_log.stagger(limit) * _US), round(sliding_log.catch_up(limit) * _US)]
        return args

    async def _shared(self, shared: Callable[[], Awaitable[T]], local: Callable[[], Awaitable[T]]) -> T:
        """Run against Redis, or locally while it is unreachable; say so once when that changes."""
        if self._retry_redis_at is not None and time.monotonic() < self._retry_redis_at:
            return await local()
        try:
            result = await shared()
        except _UNREACHABLE as exc:
            if self._retry_redis_at is None:
                logger.warning("Redis is unreachable (%s: %s); pacing locally at 1/%d of each limit until it is back",
                               type(exc).__name__, exc, self.max_replicas)
            self._retry_redis_at = time.monotonic() + RETRY_REDIS_AFTER
            return await local()
        if self._retry_redis_at is not None:
            self._retry_redis_at = None
            logger.warning("Redis is reachable again; pacing is shared across replicas again")
        return result
