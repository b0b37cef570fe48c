"""What sign-ins keep beside their sealed tokens: Redis when `AGENT_AUTOMATION_REDIS_URL` is set (so a revocation
holds everywhere at once), process memory otherwise. Codes and consent pages in flight, the chain of each grant's
refreshes and the grants that ended; and what the previous scheme left (`legacy.py`). Nothing a sign-in needs to
go on: that is in its tokens (`tokens.py`) and its client's id (`clients.py`).

Values are short strings under keys the callers build from hashes and ids: no token is ever a key or a value here.
While Redis does not answer (`StoreUnavailable`), Redis is not asked again for a moment (`SharedStore`'s pause),
so a request during an outage does not wait for a timeout first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

from ...caching import ExpiringCache, RedisAway

if TYPE_CHECKING:
    from ...caching import SharedStore

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

# KEYS: the grant's end mark, its chain. ARGV: the step of the refresh token spent, the chain's lifetime and the
# end mark's (ms). See `Store.advance`.
ADVANCE_SCRIPT: Final = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 'ended' end
local step = tonumber(ARGV[1])
local at = tonumber(redis.call('GET', KEYS[2]))
if at and at > step then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[3])
  return 'reused'
end
redis.call('SET', KEYS[2], step + 1, 'PX', ARGV[2])
return 'ok'
"""


class StoreUnavailable(Exception):
    """The shared store did not answer: what needs it (a new sign-in, a revocation) cannot go on now (answered 503,
    to try again)."""


class Store(Protocol):
    async def put(self, key: str, value: str, ttl: float) -> None: ...

    async def get(self, key: str) -> str | None: ...

    async def take(self, key: str) -> str | None:
        """Get and delete at once: of two requests taking the same key, only one gets the value."""
        ...

    async def follow(self, key: str, prefix: str) -> str | None:
        """The value under `prefix` + the value of `key` (None if either is missing), in one round trip."""
        ...

    async def advance(self, ended: str, chain: str, step: int, ttl: float, ended_ttl: float) -> str:
        """Spend step `step` of a chain of refreshes, at once: "ended" when `ended` is set; "reused" (and `ended`
        set) when the chain is past the step already, so the token was spent before; else "ok", the chain past it.
        A chain missing or behind (the store came back empty, or from an older copy) takes the step as it comes."""
        ...

    async def delete(self, *keys: str) -> None: ...

    async def close(self) -> None: ...


class MemoryStore:
    """One process's store, bounded (`ExpiringCache`: when full, the least recently used goes first)."""

    def __init__(self, max_entries: int = MAX_MEMORY_ENTRIES) -> None:
        self._entries: ExpiringCache[str] = ExpiringCache(max_entries)

    def _live(self, key: str) -> str | None:
        return self._entries.get(key)

    async def put(self, key: str, value: str, ttl: float) -> None:
        self._entries.put(key, value, ttl)

    async def get(self, key: str) -> str | None:
        return self._live(key)

    async def take(self, key: str) -> str | None:
        value = self._live(key)
        self._entries.discard(key)
        return value

    async def follow(self, key: str, prefix: str) -> str | None:
        pointer = self._live(key)
        return self._live(prefix + pointer) if pointer is not None else None

    async def advance(self, ended: str, chain: str, step: int, ttl: float, ended_ttl: float) -> str:
        if self._live(ended) is not None:
            return "ended"
        at = self._live(chain)
        if at is not None and int(at) > step:
            await self.put(ended, "1", ended_ttl)
            return "reused"
        await self.put(chain, str(step + 1), ttl)
        return "ok"

    async def delete(self, *keys: str) -> None:
        for key in keys:
            self._entries.discard(key)

    async def close(self) -> None:
        self._entries.clear()


class RedisStore:
    """The shared store: every key under one prefix, each with its own expiry, so Redis forgets what has ended."""

    def __init__(self, shared: SharedStore) -> None:
        assert shared.redis is not None
        self._shared = shared  # the replica's one client (redis_pool.py), and its pause after a failure
        self._redis = shared.redis
        self._follow = self._redis.register_script(FOLLOW_SCRIPT)
        self._advance = self._redis.register_script(ADVANCE_SCRIPT)

    async def put(self, key: str, value: str, ttl: float) -> None:
        await self._ask(lambda: self._redis.set(PREFIX + key, value, px=_ms(ttl)))

    async def get(self, key: str) -> str | None:
        return _text(await self._ask(lambda: self._redis.get(PREFIX + key)))

    async def take(self, key: str) -> str | None:
        return _text(await self._ask(lambda: self._redis.getdel(PREFIX + key)))

    async def follow(self, key: str, prefix: str) -> str | None:
        return _text(await self._ask(lambda: self._follow(keys=[PREFIX + key], args=[PREFIX + prefix])))

    async def advance(self, ended: str, chain: str, step: int, ttl: float, ended_ttl: float) -> str:
        return _text(await self._ask(lambda: self._advance(
            keys=[PREFIX + ended, PREFIX + chain], args=[step, _ms(ttl), _ms(ended_ttl)]))) or ""

    async def delete(self, *keys: str) -> None:
        if keys:
            await self._ask(lambda: self._redis.delete(*(PREFIX + key for key in keys)))

    async def _ask(self, command: Callable[[], Awaitable[T]]) -> T:
        try:
            return await self._shared.ask(lambda _: command())
        except RedisAway:
            raise StoreUnavailable("Redis did not answer, now or a moment ago") from None

    async def close(self) -> None:
        await self._redis.aclose()


def _text(value: bytes | None) -> str | None:
    return value.decode() if value is not None else None


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def create_store(shared: SharedStore) -> Store:
    return RedisStore(shared) if shared.redis is not None else MemoryStore()
