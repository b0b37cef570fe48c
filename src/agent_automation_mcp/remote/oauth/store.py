"""What sign-ins keep beside their sealed tokens: Redis when `AGENT_AUTOMATION_REDIS_URL` is set (so a revocation
holds everywhere at once), process memory otherwise. Codes and consent pages in flight, the chain of each grant's
refreshes and the grants that ended; and what the previous scheme left (`legacy.py`). Nothing a sign-in needs to
go on: that is in its tokens (`tokens.py`) and its client's id (`clients.py`). What ends a grant is also kept by every
replica (`ends.py`), so that it outlives Redis losing its data; an index of the ends (`ends`, by when each was made)
lets a replica learn them all.

Values are short strings under keys the callers build from hashes and ids: no token is ever a key or a value here,
but for a refresh's pair, kept 10 s for a retry, sealed for the refresh token that was spent (which alone opens it).
While Redis does not answer (`StoreUnavailable`), Redis is not asked again for a moment (`SharedStore`'s pause),
so a request during an outage does not wait for a timeout first.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar, cast

from ...caching import ExpiringCache, RedisAway
from .tokens import REFRESH_SECONDS

if TYPE_CHECKING:
    from ...caching import SharedStore

T = TypeVar("T")

PREFIX: Final = "aamcp:oauth:"
MAX_MEMORY_ENTRIES: Final = 200_000
# An end outlives every token of its grant: a refresh token lives REFRESH_SECONDS from its last refresh, and one
# refreshed while the store was away (unchecked) may be younger than the end; twice covers an outage of a month.
ENDED_SECONDS: Final = 2 * REFRESH_SECONDS
# A refresh token presented again this soon after it was spent is a retry (a lost answer, two requests at once): it
# gets the pair its first use got, where later it would end the grant.
RETRY_SECONDS: Final = 10
INDEX: Final = "ends"  # the sorted set of ended grants, each scored by when it ended (Redis' clock, ms)
INDEX_PAGE: Final = 10_000


def ended_key(grant_id: str) -> str:
    return f"ended:{grant_id}"


def chain_key(grant_id: str) -> str:
    return f"chain:{grant_id}"


def retry_key(grant_id: str, step: int) -> str:
    return f"retry:{grant_id}:{step}"


# The second key is named by the first's value, so it cannot be declared in KEYS: fine on one Redis (or a
# primary with replicas), which is what AGENT_AUTOMATION_REDIS_URL names; not for Redis Cluster.
FOLLOW_SCRIPT: Final = """
local pointer = redis.call('GET', KEYS[1])
if not pointer then return false end
return redis.call('GET', ARGV[1] .. pointer)
"""

# KEYS: the grant's end mark, its chain, the pair its step's refresh issued, the index of ends. ARGV: the step of the
# refresh token spent, the pair this refresh would issue (sealed for that token), the lifetimes (ms) of the chain, of
# an end and of a pair. See `Store.advance`.
ADVANCE_SCRIPT: Final = """
if redis.call('EXISTS', KEYS[1]) == 1 then return {'ended'} end
local step = tonumber(ARGV[1])
local at = tonumber(redis.call('GET', KEYS[2]))
if at and at > step then
  local issued = redis.call('GET', KEYS[3])
  if at == step + 1 and issued then return {'retry', issued} end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[4])
  redis.call('ZADD', KEYS[4], now, ARGV[6])
  return {'reused'}
end
redis.call('SET', KEYS[2], step + 1, 'PX', ARGV[3])
redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[5])
return {'ok'}
"""

# KEYS: the grant's end mark, the index of ends. ARGV: the end's lifetime (ms), the grant's id, when the end was
# made (ms, Redis' clock; 0: now). Marks the grant ended and indexes it; drops from the index what has expired.
END_SCRIPT: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local at = tonumber(ARGV[3])
if at == 0 then at = now end
local left = at + tonumber(ARGV[1]) - now
if left <= 0 then return 0 end
redis.call('SET', KEYS[1], '1', 'PX', left)
redis.call('ZADD', KEYS[2], at, ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[1]))
return at
"""

# KEYS: a chain. ARGV: the step it is at, its lifetime (ms). Sets it unless Redis holds it further on.
FURTHER_SCRIPT: Final = """
local at = tonumber(redis.call('GET', KEYS[1]))
if at and at >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
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

    async def advance(self, grant_id: str, step: int, pair: str) -> tuple[str, str | None]:
        """Spend step `step` of a grant's chain of refreshes, at once: "ended" when the grant has ended; "retry" with
        the pair issued then, when the step was spent less than `RETRY_SECONDS` ago; "reused" (and the grant ended)
        when the chain is past the step otherwise, so the token was spent before; else "ok", the chain past it and
        `pair` kept for a retry. A chain missing or behind (the store came back empty, or from an older copy) takes
        the step as it comes."""
        ...

    async def end(self, grant_id: str, at: int = 0) -> None:
        """Mark the grant ended (and index it, ended at `at`: Unix ms, or 0 for now), for `ENDED_SECONDS` from then."""
        ...

    async def ended(self, grant_id: str) -> bool: ...

    async def ends_since(self, since: int) -> list[tuple[str, int]]:
        """Grants ended at `since` (Unix ms) or later, with when, oldest first: at most `INDEX_PAGE`."""
        ...

    async def restore(self, ends: Sequence[tuple[str, int]], chains: Sequence[tuple[str, int, float]]) -> None:
        """Put back ends (grant, when) and chains (grant, step, seconds left) the store lacks (it lost its data, or
        did not answer when they were made); a chain the store holds further on is left as it is."""
        ...

    async def delete(self, *keys: str) -> None: ...

    async def close(self) -> None: ...


class MemoryStore:
    """One process's store, bounded (`ExpiringCache`: when full, the least recently used goes first)."""

    def __init__(self, max_entries: int = MAX_MEMORY_ENTRIES, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._entries: ExpiringCache[str] = ExpiringCache(max_entries, clock=clock)

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

    async def advance(self, grant_id: str, step: int, pair: str) -> tuple[str, str | None]:
        if self._live(ended_key(grant_id)) is not None:
            return "ended", None
        at = self._live(chain_key(grant_id))
        if at is not None and int(at) > step:
            issued = self._live(retry_key(grant_id, step))
            if int(at) == step + 1 and issued is not None:
                return "retry", issued
            await self.end(grant_id)
            return "reused", None
        self._entries.put(chain_key(grant_id), str(step + 1), REFRESH_SECONDS)
        self._entries.put(retry_key(grant_id, step), pair, RETRY_SECONDS)
        return "ok", None

    async def end(self, grant_id: str, at: int = 0) -> None:
        left = ENDED_SECONDS - max(0.0, time.time() - at / 1000) if at else ENDED_SECONDS
        if left > 0:
            self._entries.put(ended_key(grant_id), str(at or int(time.time() * 1000)), left)

    async def ended(self, grant_id: str) -> bool:
        return self._live(ended_key(grant_id)) is not None

    async def ends_since(self, since: int) -> list[tuple[str, int]]:
        return []  # this process's memory: no other replica adds to it

    async def restore(self, ends: Sequence[tuple[str, int]], chains: Sequence[tuple[str, int, float]]) -> None:
        pass  # this process's memory: it loses nothing another replica could give back

    def chain_at(self, grant_id: str) -> int | None:
        at = self._live(chain_key(grant_id))
        return int(at) if at is not None else None

    def marks(self) -> tuple[list[tuple[str, int]], list[tuple[str, int, float]]]:
        """The ends (grant, when) and chains (grant, step, seconds left) held here: what `restore` takes."""
        ends: list[tuple[str, int]] = []
        chains: list[tuple[str, int, float]] = []
        for key, value, left in self._entries.items():
            kind, _, grant_id = key.partition(":")
            if kind == "ended":
                ends.append((grant_id, int(value)))
            elif kind == "chain":
                chains.append((grant_id, int(value), left))
        return ends, chains

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
        self._end = self._redis.register_script(END_SCRIPT)
        self._further = self._redis.register_script(FURTHER_SCRIPT)

    async def put(self, key: str, value: str, ttl: float) -> None:
        await self._ask(lambda: self._redis.set(PREFIX + key, value, px=_ms(ttl)))

    async def get(self, key: str) -> str | None:
        return _text(await self._ask(lambda: self._redis.get(PREFIX + key)))

    async def take(self, key: str) -> str | None:
        return _text(await self._ask(lambda: self._redis.getdel(PREFIX + key)))

    async def follow(self, key: str, prefix: str) -> str | None:
        return _text(await self._ask(lambda: self._follow(keys=[PREFIX + key], args=[PREFIX + prefix])))

    async def advance(self, grant_id: str, step: int, pair: str) -> tuple[str, str | None]:
        keys = [PREFIX + key for key in (ended_key(grant_id), chain_key(grant_id), retry_key(grant_id, step), INDEX)]
        answer = await self._ask(lambda: self._advance(keys=keys, args=[
            step, pair, _ms(REFRESH_SECONDS), _ms(ENDED_SECONDS), _ms(RETRY_SECONDS), grant_id]))
        outcome, *issued = (_text(value) or "" for value in answer)
        return outcome, (issued[0] if issued else None)

    async def end(self, grant_id: str, at: int = 0) -> None:
        keys, args = _ending(grant_id, at)
        await self._ask(lambda: self._end(keys=keys, args=args))

    async def ended(self, grant_id: str) -> bool:
        return await self.get(ended_key(grant_id)) is not None

    async def ends_since(self, since: int) -> list[tuple[str, int]]:
        answer = await self._ask(lambda: self._redis.zrangebyscore(PREFIX + INDEX, since, "+inf", start=0,
                                                                   num=INDEX_PAGE, withscores=True))
        scored = cast(list[tuple[bytes, float]], answer)  # withscores: redis-py's type of the answer ignores it
        return [(grant_id.decode(), int(at)) for grant_id, at in scored]

    async def restore(self, ends: Sequence[tuple[str, int]], chains: Sequence[tuple[str, int, float]]) -> None:
        async def put_back() -> None:
            async with self._redis.pipeline(transaction=False) as pipe:
                for grant_id, at in ends:
                    keys, args = _ending(grant_id, at)
                    await self._end(keys=keys, args=args, client=pipe)
                for grant_id, step, left in chains:
                    await self._further(keys=[PREFIX + chain_key(grant_id)], args=[step, _ms(left)], client=pipe)
                await pipe.execute()

        if ends or chains:
            await self._ask(put_back)

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


def _text(value: bytes | str | None) -> str | None:
    """A Redis answer as text: bytes from our client (redis-py types answers as text too, for clients that decode)."""
    return value.decode() if isinstance(value, bytes) else value


def _ending(grant_id: str, at: int) -> tuple[list[str], list[Any]]:
    """`END_SCRIPT`'s keys and arguments for ending `grant_id` at `at` (Unix ms; 0: now)."""
    return [PREFIX + ended_key(grant_id), PREFIX + INDEX], [_ms(ENDED_SECONDS), grant_id, at]


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def create_store(shared: SharedStore) -> Store:
    return RedisStore(shared) if shared.redis is not None else MemoryStore()
