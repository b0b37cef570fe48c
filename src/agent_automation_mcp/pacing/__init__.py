"""Rate-limit pacing: every request waits until each bucket it counts against has room, then goes.

`create_pacer` picks the ledger from the settings: this process's memory, or Redis when
`AGENT_AUTOMATION_REDIS_URL` is set so that every replica shares one view of each token's sends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..caching import SharedStore
from .fifo import FifoPacer
from .ledger import Ledger
from .memory import MemoryLedger
from .service_refusals import ServiceRefusals

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from ..api.settings import ApiSettings

__all__ = ["FifoPacer", "Ledger", "MemoryLedger", "create_pacer"]


def create_pacer(settings: ApiSettings, redis: Redis | None = None, store: SharedStore | None = None) -> FifoPacer:
    """The pacer; with a Redis URL, shared through `redis` (the replica's one client: `store`'s), or a client of its
    own. The service's 429s are remembered in `store` (the replica's shared caches), else in one over that Redis."""
    if settings.rate_margin < 0 or settings.max_replicas < 1:
        raise ValueError("the rate margin must be >= 0 seconds and the replica bound >= 1")
    if settings.redis_url:
        from ..redis_pool import redis_client  # the Redis client costs start-up time; load it only when used
        from .redis_ledger import RedisLedger

        redis = redis or (store.redis if store is not None else None) or redis_client(settings.redis_url)
        ledger: Ledger = RedisLedger(redis, settings.rate_limits, margin=settings.rate_margin,
                                     max_replicas=settings.max_replicas)
    else:
        ledger = MemoryLedger(settings.rate_limits, margin=settings.rate_margin)
    return FifoPacer(ledger, settings.rate_limits, ServiceRefusals(store or SharedStore(redis)))
