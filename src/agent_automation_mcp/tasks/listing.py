"""Which tasks a token holds, for `tasks/list` (2025-11-25): their sealed ids, kept per token until they expire.

Only ids are kept, by creation time (each opens for its own token alone, so a list leaks nothing even if read; an
expired one is left out when listed), at most `MAX_TASKS` per token, the newest kept, none past the longest lifetime;
in Redis when one is configured, so every replica lists the same, else in this process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..caching import KEY_PREFIX, ExpiringCache, RedisAway, SharedStore
from ..run_status import now_ms

if TYPE_CHECKING:
    from redis.asyncio import Redis

MAX_TASKS: Final = 100  # per token: older ones leave the list (their ids still work)
PAGE_TASKS: Final = 10  # per tasks/list answer: each is read from the service (shared reads), within the budget
MAX_TOKENS: Final = 10_000
MAX_TTL_MS: Final = 24 * 3600 * 1000  # no task outlives this: a token's list goes a day after its last task


class TaskIndex:
    def __init__(self, store: SharedStore) -> None:
        self._store = store
        self._local: ExpiringCache[dict[str, int]] = ExpiringCache(MAX_TOKENS)

    @staticmethod
    def _key(token_key: str) -> str:
        return f"{KEY_PREFIX}:{{{token_key}}}:tasks"

    async def add(self, token_key: str, task_id: str, created_ms: int) -> None:
        oldest = now_ms() - MAX_TTL_MS
        async def add(redis: Redis) -> None:
            async with redis.pipeline(transaction=True) as pipe:
                key = self._key(token_key)
                pipe.zadd(key, {task_id: created_ms})  # queued: a pipeline's commands answer together, at `execute`
                pipe.zremrangebyscore(key, "-inf", oldest)
                pipe.zremrangebyrank(key, 0, -MAX_TASKS - 1)
                pipe.pexpire(key, MAX_TTL_MS)
                await pipe.execute()

        try:
            await self._store.ask(add)
        except RedisAway:  # in this process's memory, as one replica alone would
            pass
        else:
            return
        held = {tid: created for tid, created in (self._local.get(token_key) or {}).items() if created > oldest}
        held[task_id] = created_ms
        kept = dict(sorted(held.items(), key=lambda item: item[1])[-MAX_TASKS:])
        self._local.put(token_key, kept, MAX_TTL_MS / 1000)

    async def page(self, token_key: str, start: int) -> tuple[list[str], bool]:
        """Up to `PAGE_TASKS` ids from `start`, newest first, and whether more follow."""
        oldest = now_ms() - MAX_TTL_MS
        try:
            found = await self._store.ask(lambda redis: redis.zrevrangebyscore(
                self._key(token_key), "+inf", oldest, start=start, num=PAGE_TASKS + 1))
        except RedisAway:
            pass
        else:
            decoded = [i.decode() if isinstance(i, bytes) else str(i) for i in found]
            return decoded[:PAGE_TASKS], len(decoded) > PAGE_TASKS
        held = sorted(((created, tid) for tid, created in (self._local.get(token_key) or {}).items()
                       if created > oldest), reverse=True)
        ids = [tid for _, tid in held[start:start + PAGE_TASKS + 1]]
        return ids[:PAGE_TASKS], len(ids) > PAGE_TASKS

