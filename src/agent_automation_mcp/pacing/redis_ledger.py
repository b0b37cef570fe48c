"""Send logs in Redis, shared by every replica, so N replicas on one token together stay within its limits.

Each check-and-charge is one server-side script over all of a request's buckets, timed by Redis' own
clock, so replicas whose clocks disagree cannot skew a window. Keys carry the token's hash and a hash tag
(`aamcp:{<token_key>}:<bucket>`), so a token's keys share one Cluster slot and never show the token.
If Redis cannot be reached, this replica keeps serving from a local ledger at 1/max_replicas of each limit, on
top of the shared history it last saw, which stays within the limit as long as no more replicas than that run,
and tries Redis again shortly (see `RedisLedger`).
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from importlib.resources import files
from typing import Final, Literal

import anyio
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as BrokenConnection
from redis.exceptions import RedisError

from ..api.limits import RateLimit
from ..api.pacer import Receipt
from . import sliding_log
from .ledger import Outcome
from .memory import MemoryLedger

logger = logging.getLogger(__name__)

REDIS_TIMEOUT: Final = 0.25  # seconds; a stalled Redis must not stall every request
REDIS_CONNECTIONS: Final = 32  # per replica; more calls at once wait for a connection
# Seconds a call waits for a free connection before Redis counts as unreachable. Longer than a busy event loop's
# lag (a stalled Redis is found by REDIS_TIMEOUT on the connections in use, not by this wait).
REDIS_POOL_WAIT: Final = 5.0
RETRY_REDIS_AFTER: Final = 2.0  # seconds of local pacing before Redis is tried again
KEY_PREFIX: Final = "aamcp"
_US: Final = 1_000_000
_ACQUIRE: Final = files(__package__).joinpath("acquire.lua").read_text()
_PENALISE: Final = files(__package__).joinpath("penalise.lua").read_text()
_CARRY: Final = files(__package__).joinpath("carry.lua").read_text()
_SETTLE: Final = files(__package__).joinpath("settle.lua").read_text()
_OUTCOMES: Final[dict[Outcome | Literal["never sent"], int]] = {  # as settle.lua numbers them
    "admitted": 0, "refused": 1, "unanswered": 2, "never sent": 3}
_UNREACHABLE: Final = (RedisError, OSError, TimeoutError)

Route = Literal["shared", "rejoining", "local"]


def bucket_keys(token_key: str, buckets: Sequence[str]) -> list[str]:
    """Per bucket its log and its mode hash; the `{...}` hash tag keeps one token's keys in one slot."""
    keys = []
    for bucket in buckets:
        log = f"{KEY_PREFIX}:{{{token_key}}}:{bucket}"
        keys += [log, f"{log}:mode"]
    return keys


class RedisLedger:
    """A `Ledger` in Redis, falling back to local pacing while Redis is unreachable.

    While Redis answers, the local ledger mirrors the shared log of every bucket it touches (all replicas'
    sends), so a fall-back starts from that history, not from nothing. Cut off, this replica counts each of its
    sends `max_replicas` times on top of it: its share, whatever the others sent before. When Redis answers again,
    the sends made meanwhile are carried into it. For one more window (and the time other replicas take to notice)
    a send must then pass both Redis and the local share: the sends of replicas still cut off are not in Redis yet.
    """

    def __init__(self, url: str, limits: Mapping[str, RateLimit], *, margin: float, max_replicas: int) -> None:
        self.limits = dict(limits)
        self.margin = margin
        self.local = MemoryLedger(limits, margin=margin, weight=max(1, max_replicas))
        self.max_replicas = max_replicas
        # One retry, on a broken connection only: a pooled connection from before a Redis restart fails once,
        # and must not send this replica back to local pacing; a stalled Redis (timeouts) is not waited for twice.
        # A blocking pool: past REDIS_CONNECTIONS calls at once wait their turn (a script takes well under a
        # millisecond) instead of failing, which would send the replica to local pacing under a burst of tenants.
        pool = BlockingConnectionPool.from_url(
            url, max_connections=REDIS_CONNECTIONS, timeout=REDIS_POOL_WAIT, socket_timeout=REDIS_TIMEOUT,
            socket_connect_timeout=REDIS_TIMEOUT, retry=Retry(NoBackoff(), 1, supported_errors=(BrokenConnection,)))
        self._redis = Redis.from_pool(pool)
        self._acquire = self._redis.register_script(_ACQUIRE)
        self._penalise = self._redis.register_script(_PENALISE)
        self._carry = self._redis.register_script(_CARRY)
        self._settle = self._redis.register_script(_SETTLE)
        self._retry_redis_at: float | None = None  # set while Redis is unreachable
        self._rejoined_until: float | None = None  # set while pacing at the share after Redis came back
        self._unshared: dict[str, dict[str, list[float]]] = {}  # token -> bucket -> bounds Redis has not seen
        self._carrying = False  # a call is handing Redis those sends
        self._rejoining = anyio.Lock()

    @property
    def degraded(self) -> bool:
        """Pacing locally at this replica's share."""
        return self._retry_redis_at is not None or self._rejoined_until is not None

    async def charge(self, token_key: str, buckets: Sequence[str], *, bulk: bool) -> Receipt | float:
        route = await self._route()
        if route == "shared":
            try:
                return await self._charge(token_key, buckets, bulk, mirror=True)
            except _UNREACHABLE as exc:
                self._lost(exc)
        elif route == "rejoining":
            # One at a time: the local share is checked before Redis is asked, and counted after it said yes.
            async with self._rejoining:
                if wait := await self.local.estimate(token_key, buckets, bulk=bulk, ahead=0):
                    return wait
                try:
                    shared = await self._charge(token_key, buckets, bulk, mirror=False)
                except _UNREACHABLE as exc:
                    self._lost(exc)
                else:
                    if isinstance(shared, Receipt):
                        return replace(shared, local=self.local.record(token_key, buckets).local)
                    return shared
        charged = await self.local.charge(token_key, buckets, bulk=bulk)
        if isinstance(charged, Receipt) and charged.local is not None:
            now, sent = time.monotonic(), self._unshared.setdefault(token_key, {})
            for bucket in buckets:  # only the last two windows can matter to Redis (see acquire.lua)
                kept = 2 * self.limits[bucket].window + self.margin
                sent[bucket] = [*(t for t in sent.get(bucket, ()) if now - t < kept), charged.local]
        return charged

    async def settle(self, receipt: Receipt, outcome: Outcome) -> None:
        """Settle the send in each ledger it was logged in. In Redis only while Redis answers; else (or should
        this fail) the send keeps its bound there, which is safe. Bounds not yet carried into Redis stay too."""
        await self.local.settle(receipt, outcome)
        if receipt.shared is not None and self._retry_redis_at is None:
            await self._settle_shared(receipt.token_key, receipt.buckets, receipt.shared, outcome)

    async def estimate(self, token_key: str, buckets: Sequence[str], *, bulk: bool, ahead: int) -> float:
        if await self._route() == "shared":
            try:
                keys, args = bucket_keys(token_key, buckets), self._args(buckets, bulk, 0, ahead)
                _, wait, now, *views = await self._acquire(keys=keys, args=args)
                self._mirror(token_key, buckets, now, views)
                return wait / _US
            except _UNREACHABLE as exc:
                self._lost(exc)
        return await self.local.estimate(token_key, buckets, bulk=bulk, ahead=ahead)

    async def penalise(self, token_key: str, buckets: Sequence[str], retry_after: float | None) -> float:
        if await self._route() != "local":
            pause = -1 if retry_after is None else round(sliding_log.clamp_pause(retry_after) * _US)
            args = [pause, random.random(), *(round(x * _US) for x in (
                sliding_log.SPACING_SECONDS, sliding_log.STRIKE_MEMORY, sliding_log.MIN_PAUSE,
                sliding_log.BACKOFF_CAP))]
            for bucket in buckets:
                args += [self.limits[bucket].count, round(self.limits[bucket].window * _US)]
            try:
                wait = await self._penalise(keys=bucket_keys(token_key, buckets), args=args) / _US
            except _UNREACHABLE as exc:
                self._lost(exc)
            else:  # the next acquire mirrors the pause; until then the local ledger holds it too
                await self.local.penalise(token_key, buckets, wait)
                return wait
        return await self.local.penalise(token_key, buckets, retry_after)

    async def reachable(self) -> bool | None:
        try:
            return bool(await self._redis.ping())
        except _UNREACHABLE:
            return False

    async def aclose(self) -> None:
        await self._redis.aclose()
        await self.local.aclose()

    async def _charge(self, token_key: str, buckets: Sequence[str], bulk: bool, *,
                      mirror: bool) -> Receipt | float:
        keys = bucket_keys(token_key, buckets)
        # Shielded: once the script has run, its answer must come back, or a cancelled caller stays charged.
        with anyio.CancelScope(shield=True):
            charged, value, now, *views = await self._acquire(keys=keys, args=self._args(buckets, bulk, 1, 0))
        if mirror:
            self._mirror(token_key, buckets, now, views)
        if not charged:
            return max(value, 1) / _US
        try:
            await anyio.lowlevel.checkpoint()  # the caller was cancelled meanwhile: give the send back
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._settle_shared(token_key, buckets, value, "never sent")
            raise
        return Receipt(token_key, tuple(buckets), shared=value)

    async def _settle_shared(self, token_key: str, buckets: Sequence[str], bound: int,
                             outcome: Outcome | Literal["never sent"]) -> None:
        try:
            await self._settle(keys=bucket_keys(token_key, buckets), args=[bound, _OUTCOMES[outcome]])
        except _UNREACHABLE as exc:
            logger.debug("could not settle a send in Redis; it keeps its bound there: %s", exc)

    def _args(self, buckets: Sequence[str], bulk: bool, charge: int, ahead: int) -> list[int | float]:
        args: list[int | float] = [charge, ahead, round(self.margin * _US), round(sliding_log.PROBE_LEASE * _US)]
        for bucket in buckets:
            limit = self.limits[bucket]
            args += [limit.count, sliding_log.bulk_cap(limit) if bulk else limit.count, round(limit.window * _US),
                     round(sliding_log.spacing_interval(limit) * _US),
                     round(sliding_log.stagger(limit) * _US), round(sliding_log.catch_up(limit) * _US)]
        return args

    def _mirror(self, token_key: str, buckets: Sequence[str], redis_now: int, views: list[list[int]]) -> None:
        """Copy the shared logs into the local ledger, on this process' clock."""
        now = time.monotonic()
        self.local.sweep(now)
        offset = now - redis_now / _US

        def local_time(stamp: int) -> float:
            return stamp / _US + offset if stamp else -math.inf

        for log, (pause_until, spacing_until, last_sent, *bounds) in zip(
                self.local.bucket_logs(token_key, buckets), views, strict=True):
            log.mirror([local_time(bound) for bound in reversed(bounds)], local_time(pause_until),
                       local_time(spacing_until), local_time(last_sent), now)

    async def _route(self) -> Route:
        """Where to pace now. Rejoins Redis when due: carries the sends made meanwhile, then keeps the local share
        as well until every replica's sends are surely in Redis or out of every window."""
        now = time.monotonic()
        if self._retry_redis_at is not None:
            if now < self._retry_redis_at or self._carrying:
                return "local"
            self._carrying = True  # one attempt at a time, however long it takes; the others stay local
            try:
                await self._carry_unshared()
            except _UNREACHABLE as exc:
                self._lost(exc)
                return "local"
            finally:
                self._carrying = False
            self._retry_redis_at = None
            grace = max(limit.window for limit in self.limits.values()) + self.margin + RETRY_REDIS_AFTER
            self._rejoined_until = now + grace
            logger.warning("Redis is reachable again, and this replica's sends meanwhile are in it; keeping to "
                           "1/%d of each limit as well for another %.1fs, until every replica's are",
                           self.max_replicas, grace)
        if self._rejoined_until is not None:
            if now < self._rejoined_until:
                return "rejoining"
            self._rejoined_until = None
            logger.warning("Pacing is shared across replicas through Redis again")
        return "shared"

    def _lost(self, exc: BaseException) -> None:
        now = time.monotonic()
        if not self.degraded:
            logger.warning("Redis is unreachable (%s: %s); pacing locally at 1/%d of each limit until it is back",
                           type(exc).__name__, exc, self.max_replicas)
            for log in self.local.all_logs():
                log.assume_taken(now)
        self._rejoined_until = None
        self._retry_redis_at = now + RETRY_REDIS_AFTER

    async def _carry_unshared(self) -> None:
        """Hand Redis the sends it has not seen, one script per token (a token's keys share one Cluster slot)."""
        now = time.monotonic()
        if not self._unshared:
            await self._redis.ping()  # nothing to carry; only whether Redis answers
        for token_key in list(self._unshared):
            sent = self._unshared.pop(token_key)  # sends made while this awaits are carried next time
            buckets = sorted(sent)
            args: list[int | float] = [round(self.margin * _US)]
            for bucket in buckets:
                limit = self.limits[bucket]
                recent = [round((now - t) * _US) for t in sent[bucket]]
                args += [limit.count, round(limit.window * _US), len(recent), *recent]
            try:
                await self._carry(keys=bucket_keys(token_key, buckets)[::2], args=args)
            except BaseException:
                later = self._unshared.pop(token_key, {})
                self._unshared[token_key] = {b: sent.get(b, []) + later.get(b, []) for b in sent.keys() | later.keys()}
                raise
