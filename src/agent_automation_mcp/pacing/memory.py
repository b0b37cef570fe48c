"""Send logs in this process's memory: the ledger of a single replica, and of a replica cut off from Redis."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from ..api.limits import RateLimit
from . import sliding_log
from .sliding_log import BucketLog

SWEEP_EVERY: Final = 60.0  # seconds between passes that forget idle (token, bucket) logs


class MemoryLedger:
    """A `Ledger` on `time.monotonic()`. Every method runs without awaiting, so each is atomic in the event loop."""

    def __init__(self, limits: Mapping[str, RateLimit], *, margin: float,
                 clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None) -> None:
        self.limits = dict(limits)
        self.margin = margin
        self._clock = clock
        self._rng = rng
        self._logs: dict[tuple[str, str], BucketLog] = {}
        self._next_sweep = clock() + SWEEP_EVERY

    def _bucket_logs(self, token_key: str, buckets: Sequence[str]) -> list[BucketLog]:
        logs = []
        for bucket in buckets:
            log = self._logs.get((token_key, bucket))
            if log is None:
                log = self._logs[token_key, bucket] = BucketLog(self.limits[bucket], self.margin)
            logs.append(log)
        return logs

    async def charge(self, token_key: str, buckets: Sequence[str], *, bulk: bool) -> float:
        now = self._clock()
        self._sweep(now)
        return sliding_log.try_charge(self._bucket_logs(token_key, buckets), now, bulk=bulk)

    async def estimate(self, token_key: str, buckets: Sequence[str], *, bulk: bool, ahead: int) -> float:
        now = self._clock()
        return sliding_log.ready_at(self._bucket_logs(token_key, buckets), now, bulk=bulk, ahead=ahead) - now

    async def penalise(self, token_key: str, buckets: Sequence[str], retry_after: float | None) -> float:
        return sliding_log.penalise(self._bucket_logs(token_key, buckets), self._clock(), retry_after, self._rng)

    async def reachable(self) -> bool | None:
        return None

    async def aclose(self) -> None:
        self._logs.clear()

    def _sweep(self, now: float) -> None:
        """Forget logs that can no longer delay anything, so memory follows active tokens, not all tokens ever seen."""
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_EVERY
        for key in [key for key, log in self._logs.items() if log.idle(now)]:
            del self._logs[key]
