"""Where grants, codes, clients and consent pages live: Redis when `AGENT_AUTOMATION_REDIS_URL` is set (so any
replica honours what another issued, and a revocation holds everywhere at once), process memory otherwise.

Values are short strings under keys the callers build from hashes: no token is ever a key or a value here.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

if TYPE_CHECKING:
    from redis.asyncio import Redis

T = TypeVar("T")

PREFIX: Final = "aamcp:oauth:"
MAX_MEMORY_ENTRIES: Final = 200_000


# The second key is named by the first's value, so it cannot be declared in KEYS: fine on one Redis (or a
# primary with replicas), which is what AGENT_AUTOMATION_REDIS_URL names; not for Redis Cluster.
FOLLOW_SCRIPT: Final = """
local pointer = redis.call('GET', KEYS[1])
if not pointer then return false end
return redis.call('GET', ARGV[1] .. pointer)
"""


class StoreUnavailable(Exception):
    """The shared store did not answer: sign-in cannot go on now (answered 503, to try again)."""


class Store(Protocol):
    async def put(self, key: str, value: str, ttl: float) -> None: ...

    async def get(self, key: str) -> str | None: ...

    async def take(self, key: str) -> str | None:
        """Get and delete at once: of two requests taking the same key, only one gets the value."""
        ...

    async def follow(self, key: str, prefix: str) -> str | None:
        """The value under `prefix` + the value of `key` (None if either is missing), in one round trip."""
        ...

    async def delete(self, *keys: str) -> None: ...

    async def close(self) -> None: ...


class MemoryStore:
    """One process's store, bounded: when full, expired entries go first, then the soonest to expire."""

    def __init__(self, max_entries: int = MAX_MEMORY_ENTRIES) -> None:
        self._entries: dict[str, tuple[float, str]] = {}
        self._max = max_entries

    def _live(self, key: str) -> str | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= time.monotonic():
            del self._entries[key]
            return None
        return entry[1]

    async def put(self, key: str, value: str, ttl: float) -> None:
        if key not in self._entries and len(self._entries) >= self._max:
            self._make_room()
        self._entries[key] = (time.monotonic() + ttl, value)

    def _make_room(self) -> None:
        now = time.monotonic()
        for key in [k for k, (until, _) in self._entries.items() if until <= now]:
            del self._entries[key]
        if len(self._entries) >= self._max:
            del self._entries[min(self._entries, key=lambda k: self._entries[k][0])]

    async def get(self, key: str) -> str | None:
        return self._live(key)

    async def take(self, key: str) -> str | None:
        value = self._live(key)
        self._entries.pop(key, None)
        return value

    async def follow(self, key: str, prefix: str) -> str | None:
        pointer = self._live(key)
        return self._live(prefix + pointer) if pointer is not None else None

    async def delete(self, *keys: str) -> None:
        for key in keys:
            self._entries.pop(key, None)

    async def close(self) -> None:
        self._entries.clear()


class RedisStore:
    """The shared store: every key under one prefix, each with its own expiry, so Redis forgets what has ended."""

    def __init__(self, redis: Redis) -> None:
        from ...redis_pool import UNREACHABLE  # the replica's one client: its timeouts and retry (redis_pool.py)

        self._redis = redis
        self._errors = UNREACHABLE
        self._follow = self._redis.register_script(FOLLOW_SCRIPT)

    async def put(self, key: str, value: str, ttl: float) -> None:
        await self._ask(self._redis.set(PREFIX + key, value, px=max(1, int(ttl * 1000))))

    async def get(self, key: str) -> str | None:
        return _text(await self._ask(self._redis.get(PREFIX + key)))

    async def take(self, key: str) -> str | None:
        return _text(await self._ask(self._redis.getdel(PREFIX + key)))

    async def follow(self, key: str, prefix: str) -> str | None:
        return _text(await self._ask(self._follow(keys=[PREFIX + key], args=[PREFIX + prefix])))

    async def delete(self, *keys: str) -> None:
        if keys:
            await self._ask(self._redis.delete(*(PREFIX + key for key in keys)))

    async def _ask(self, command: Awaitable[T]) -> T:
        try:
            return await command
        except self._errors as exc:
            raise StoreUnavailable(f"Redis did not answer ({type(exc).__name__})") from None

    async def close(self) -> None:
        await self._redis.aclose()


def _text(value: bytes | None) -> str | None:
    return value.decode() if value is not None else None


def create_store(redis: Redis | None) -> Store:
    return RedisStore(redis) if redis is not None else MemoryStore()
