"""Rate-limit pacing: every request waits until each bucket it counts against has room, then goes.

`create_pacer` picks the ledger from the settings: this process's memory, or Redis when
`AGENT_AUTOMATION_REDIS_URL` is set so that every replica shares one view of each token's sends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .fifo import FifoPacer
from .ledger import Ledger
from .memory import MemoryLedger

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from ..api.settings import ApiSettings

__all__ = ["FifoPacer", "Ledger", "MemoryLedger", "create_pacer"]


def create_pacer(settings: ApiSettings, redis: Redis | None = None) -> FifoPacer:
    """The pacer; with a Redis URL, shared through `redis` (the replica's one client), or a client of its own."""
    if settings.rate_margin < 0 or settings.max_replicas < 1:
        raise ValueError("the rate margin must be >= 0 seconds and the replica bound >= 1")
    if settings.redis_url:
        from ..redis_pool import redis_client  # the Redis client costs start-up time; load it only when used
        from .redis_ledger import RedisLedger

        ledger: Ledger = RedisLedger(redis or redis_client(settings.redis_url), settings.rate_limits,
                                     margin=settings.rate_margin, max_replicas=settings.max_replicas)
    else:
        ledger = MemoryLedger(settings.rate_limits, margin=settings.rate_margin)
    return FifoPacer(ledger, settings.rate_limits)
