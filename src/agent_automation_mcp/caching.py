"""Caches bounded in both count and age, for what the server remembers per token, and their shared form.

A remote server sees many tokens in a day; whatever it keeps per token (its organisation, whether the
service accepts it) must not grow without end, so entries expire and the oldest go first when full.
Replicas share these through Redis when one is configured (`SharedCache`), keyed by the token's hash.
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

import anyio

if TYPE_CHECKING:
    from redis.asyncio import Redis

logger = logging.getLogger(__name__)

V = TypeVar("V")
T = TypeVar("T")


class ExpiringCache(Generic[V]):
    """At most `max_entries` values, each kept at most its `ttl` seconds; the least recently used goes first. The one
    in-memory expiring map: token caches, tool lists, and the sign-in store without Redis."""

    def __init__(self, max_entries: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def put(self, key: str, value: V, ttl: float) -> None:
        self._entries[key] = (self._clock() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def discard(self, key: str) -> None:
        self._entries.pop(key, None)

    def items(self) -> list[tuple[str, V, float]]:
        """Every live entry: its key, value and seconds left."""
        now = self._clock()
        return [(key, value, until - now) for key, (until, value) in self._entries.items() if until > now]

    def clear(self) -> None:
        self._entries.clear()


KEY_PREFIX: Final = "aamcp"  # as the pacing keys: `aamcp:{<token hash>}:...`, one Cluster slot per token
MARKER_KEY: Final = f"{KEY_PREFIX}:marker"  # set by every replica; missing, Redis lost its data (pacing/epoch.lua)
RETRY_REDIS_AFTER: Final = 2.0  # seconds of memory only after Redis failed, before it is tried again
POLL_SECONDS: Final = 0.05  # how often a replica looks for the answer another replica is fetching


class RedisAway(Exception):
    """Redis is not configured, failed a moment ago, or failed now: the caller goes on in this process's memory."""


class SharedStore:
    """The Redis every replica shares, for what is remembered per token hash; without one, this process's memory.

    Redis that does not answer is not an error: each cache goes on in memory (as one replica alone would) and
    Redis is tried again a little later (the sign-in store keeps the same pause: remote/oauth/store.py). `redis` is
    the replica's one client (redis_pool.py), or None for memory.
    """

    def __init__(self, redis: Redis | None = None) -> None:
        self.redis = redis
        self.failures: tuple[type[Exception], ...] = ()  # what Redis raises when it cannot answer
        if redis is not None:
            from .redis_pool import UNREACHABLE

            self.failures = UNREACHABLE
        self._retry_at = 0.0

    def reachable(self) -> Redis | None:
        """Redis, unless none is configured or it failed a moment ago."""
        return self.redis if time.monotonic() >= self._retry_at else None

    async def ask(self, command: Callable[[Redis], Awaitable[T]]) -> T:
        """`command` run on Redis, or `RedisAway`: the one rule for "Redis, else memory". A failure is noted
        (`lost`), and Redis is not asked again for `RETRY_REDIS_AFTER` seconds, so a Redis that is down costs each
        request nothing but the fallback."""
        redis = self.reachable()
        if redis is None:
            raise RedisAway
        try:
            return await command(redis)
        except self.failures as exc:
            self.lost(exc)
            raise RedisAway from None

    def lost(self, exc: Exception) -> None:
        if time.monotonic() >= self._retry_at:
            logger.warning("Redis is unreachable for the shared token caches and sign-ins (%s); remembering in "
                           "memory, and checking sign-ins against the ends this replica holds, meanwhile",
                           type(exc).__name__)
        self._retry_at = time.monotonic() + RETRY_REDIS_AFTER

    async def aclose(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()


class SharedCache(Generic[V]):
    """Values per token hash that every replica shares through the store's Redis, with the same lifetimes there.

    This process keeps what it has read or written (bounded in count, for what remains of each lifetime), so a
    value costs one Redis read per replica, not one per request. `remembered` fetches a missing value once,
    whatever the number of replicas and requests asking for it at the same moment.
    """

    def __init__(self, store: SharedStore, namespace: str, max_entries: int, *,
                 decode: Callable[[Any], V] = lambda value: value) -> None:
        self.store = store
        self.namespace = namespace
        self._local: ExpiringCache[V] = ExpiringCache(max_entries)
        self._decode = decode
        self._fetching: dict[str, anyio.Lock] = {}  # token hash -> one fetch at a time in this process

    def _key(self, key: str) -> str:
        return f"{KEY_PREFIX}:{{{key}}}:{self.namespace}"

    async def get(self, key: str) -> V | None:
        value = self._local.get(key)
        return value if value is not None else await self._shared(key)

    async def _shared(self, key: str) -> V | None:
        """The value as Redis holds it (remembered here for what remains of its lifetime); None without one."""

        async def read(redis: Redis) -> list[Any]:
            async with redis.pipeline(transaction=False) as pipe:
                pipe.get(self._key(key))  # queued: a pipeline's commands answer together, at `execute`
                pipe.pttl(self._key(key))
                return await pipe.execute()

        try:
            raw, ttl_ms = await self.store.ask(read)
        except RedisAway:
            return None
        if raw is None or ttl_ms <= 0:
            return None
        value = self._decode(json.loads(raw))
        self._local.put(key, value, ttl_ms / 1000)
        return value

    async def put(self, key: str, value: V, ttl: float) -> None:
        self._local.put(key, value, ttl)
        with suppress(RedisAway):
            await self.store.ask(lambda redis: redis.set(self._key(key), json.dumps(value),
                                                         px=max(1, round(ttl * 1000))))

    async def remembered(self, key: str, fetch: Callable[[], Awaitable[tuple[V, float] | None]], *,
                         fetch_seconds: float, accept: Callable[[V], bool] = lambda value: True) -> V | None:
        """The value, fetched when missing: `fetch` answers (value, lifetime), or None for nothing to remember. A
        value `accept` refuses (too old for this caller) counts as missing.

        One fetch per key at a time in this process (the others wait, then read what it remembered) and, through a
        lock in Redis, across replicas; a replica waits at most `fetch_seconds` for another's fetch, then fetches.
        """
        value = await self._accepted(key, accept)
        if value is not None:
            return value
        lock = self._fetching.setdefault(key, anyio.Lock())
        try:
            async with lock:
                value = await self._accepted(key, accept)
                if value is not None:
                    return value
                return await self._fetch_once(key, fetch, fetch_seconds, accept)
        finally:
            if not lock.locked() and not lock.statistics().tasks_waiting:
                self._fetching.pop(key, None)

    async def _accepted(self, key: str, accept: Callable[[V], bool]) -> V | None:
        """The value if `accept` takes it; one this process holds but refuses is looked for in Redis, where another
        replica may have put a newer one."""
        value = await self.get(key)
        if value is not None and not accept(value) and self._local.get(key) is not None:
            value = await self._shared(key)
        return value if value is not None and accept(value) else None

    async def _fetch_once(self, key: str, fetch: Callable[[], Awaitable[tuple[V, float] | None]],
                          fetch_seconds: float, accept: Callable[[V], bool]) -> V | None:
        fetching, owned = f"{self._key(key)}:fetching", False
        give_up = time.monotonic() + fetch_seconds
        try:
            while time.monotonic() < give_up:
                try:
                    owned = bool(await self.store.ask(
                        lambda redis: redis.set(fetching, "1", nx=True, px=round(fetch_seconds * 1000))))
                except RedisAway:
                    break
                if not owned:
                    await anyio.sleep(POLL_SECONDS)  # another replica is fetching: take its answer
                value = await self._accepted(key, accept)  # (owned: one may have come since this process looked)
                if value is not None:
                    return value
                if owned:
                    break
            answer = await fetch()
            if answer is None:
                return None
            await self.put(key, *answer)
            return answer[0]
        finally:
            if owned:
                with anyio.CancelScope(shield=True), suppress(RedisAway):
                    await self.store.ask(lambda redis: redis.delete(fetching))
