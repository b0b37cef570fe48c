"""Send logs in this process's memory: the ledger of a single replica, and of a replica cut off from Redis."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from ..api.limits import RateLimit
from ..api.pacer import Receipt
from . import sliding_log
from .ledger import Outcome
from .sliding_log import BucketLog

SWEEP_EVERY: Final = 60.0  # seconds between passes that forget idle (token, bucket) logs


class MemoryLedger:
    """A `Ledger` on `time.monotonic()`. Every method runs without awaiting, so each is atomic in the event loop."""

    def __init__(self, limits: Mapping[str, RateLimit], *, margin: float,
                 clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None,
                 weight: int = 1) -> None:
        self.limits = dict(limits)
        self.margin = margin
        self.weight = weight  # each send counts this many times (see BucketLog)
        self._clock = clock
        self._rng = rng
        self._logs: dict[tuple[str, str], BucketLog] = {}
        self._next_sweep = clock() + SWEEP_EVERY
        self._filled_at: float | None = None  # see fill
        # How long a fill can matter: a log filled then stops being held back (or staggered) two windows later.
        self._fill_matters = 2 * max((limit.window for limit in self.limits.values()), default=0.0) + margin

    def bucket_logs(self, token_key: str, buckets: Sequence[str]) -> list[BucketLog]:
        logs = []
        for bucket in buckets:
            log = self._logs.get((token_key, bucket))
            if log is None:
                log = self._logs[token_key, bucket] = BucketLog(self.limits[bucket], self.margin, self.weight)
                if self._filled_at is not None:
                    log.fill(self._filled_at)
            logs.append(log)
        return logs

    def fill(self, at: float) -> None:
        """Every log, and every log made from now on, counts its limit's worth of sends made at `at`: other
        replicas may have filled any token's window by then, unseen here (see BucketLog.fill)."""
        self._filled_at = at
        for log in self._logs.values():
            log.fill(at)

    async def charge(self, token_key: str, buckets: Sequence[str], *, bulk: bool) -> Receipt | float:
        now = self._clock()
        self.sweep(now)
        if wait := sliding_log.try_charge(self.bucket_logs(token_key, buckets), now, bulk=bulk):
            return wait
        return self._receipt(token_key, buckets, now)

    def record(self, token_key: str, buckets: Sequence[str]) -> Receipt:
        """Log a send another ledger admitted just now, without asking this one."""
        now = self._clock()
        for log in self.bucket_logs(token_key, buckets):
            log.charge(now)
        return self._receipt(token_key, buckets, now)

    def _receipt(self, token_key: str, buckets: Sequence[str], charged_at: float) -> Receipt:
        return Receipt(token_key, tuple(buckets), local=charged_at + self.margin)  # the bound BucketLog.charge logs

    async def settle(self, receipt: Receipt, outcome: Outcome) -> None:
        if receipt.local is not None:
            sliding_log.settle(self.bucket_logs(receipt.token_key, receipt.buckets), receipt.local, self._clock(),
                               outcome)

    async def estimate(self, token_key: str, buckets: Sequence[str], *, bulk: bool, ahead: int) -> float:
        now = self._clock()
        return sliding_log.ready_at(self.bucket_logs(token_key, buckets), now, bulk=bulk, ahead=ahead) - now

    async def penalise(self, token_key: str, buckets: Sequence[str], retry_after: float | None) -> float:
        return sliding_log.penalise(self.bucket_logs(token_key, buckets), self._clock(), retry_after, self._rng)

    async def store_state(self) -> None:
        return None

    async def aclose(self) -> None:
        self._logs.clear()

    def sweep(self, now: float) -> None:
        """Forget logs that can no longer delay anything, so memory follows active tokens, not all tokens ever seen."""
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_EVERY
        if self._filled_at is not None and self._filled_at + self._fill_matters <= now:
            self._filled_at = None
        for key in [key for key, log in self._logs.items() if log.idle(now)]:
            del self._logs[key]
