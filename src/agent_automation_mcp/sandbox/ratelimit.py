"""Rate limits per (token, bucket), enforced by one of three algorithms.

A request is charged to every bucket of its operation or to none: if any bucket refuses it, nothing is charged.
Refused requests are never charged, so a client that keeps retrying too early is not punished further.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from ..api.limits import RateLimit
from .config import Algorithm

_EPSILON = 1e-3


class Counter(Protocol):
    def wait(self, now: float) -> float:
        """Seconds until one more request would be allowed; 0 when it is allowed now."""

    def charge(self, now: float) -> None: ...


class FixedWindow:
    """At most `count` per window; windows are aligned to a seeded phase, so bursts may straddle two windows."""

    def __init__(self, limit: RateLimit, phase: float) -> None:
        self.limit, self.phase = limit, phase
        self.index, self.used = 0, 0

    def _roll(self, now: float) -> int:
        index = math.floor((now - self.phase) / self.limit.window)
        if index != self.index:
            self.index, self.used = index, 0
        return index

    def wait(self, now: float) -> float:
        index = self._roll(now)
        if self.used < self.limit.count:
            return 0.0
        return max(self.phase + (index + 1) * self.limit.window - now, _EPSILON)

    def charge(self, now: float) -> None:
        self._roll(now)
        self.used += 1


class SlidingLog:
    """Exact: at most `count` requests in any `window` seconds."""

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self.times: deque[float] = deque()

    def wait(self, now: float) -> float:
        while self.times and self.times[0] <= now - self.limit.window:
            self.times.popleft()
        if len(self.times) < self.limit.count:
            return 0.0
        return max(self.times[-self.limit.count] + self.limit.window - now, _EPSILON)

    def charge(self, now: float) -> None:
        self.times.append(now)


class SlidingCounter:
    """Cloudflare's estimate: `previous * (1 - elapsed fraction) + current` must stay within `count`."""

    def __init__(self, limit: RateLimit, phase: float) -> None:
        self.limit, self.phase = limit, phase
        self.index, self.previous, self.current = 0, 0, 0

    def _roll(self, now: float) -> float:
        """Move to the window holding `now`; return its start."""
        index = math.floor((now - self.phase) / self.limit.window)
        if index == self.index + 1:
            self.previous, self.current = self.current, 0
        elif index != self.index:
            self.previous, self.current = 0, 0
        self.index = index
        return self.phase + index * self.limit.window

    def wait(self, now: float) -> float:
        start = self._roll(now)
        count, window = self.limit.count, self.limit.window
        elapsed = (now - start) / window
        if self.previous * (1 - elapsed) + self.current + 1 <= count:
            return 0.0
        if self.current + 1 <= count:  # the previous window's weight has to fade a little more
            needed = 1 - (count - 1 - self.current) / self.previous
            return max(start + window * needed - now, _EPSILON)
        needed = max(0.0, 1 - (count - 1) / self.current)  # in the next window, this one becomes the previous
        return max(start + window * (1 + needed) - now, _EPSILON)

    def charge(self, now: float) -> None:
        self._roll(now)
        self.current += 1


@dataclass(frozen=True, slots=True)
class Rejection:
    bucket: str
    limit: RateLimit
    retry_after: float  # seconds until every bucket of the operation allows the request

    @property
    def message(self) -> str:
        return (f"Rate limit exceeded: {self.limit.count} requests per {self.limit.window:g} seconds "
                f"({self.bucket}). Please try again later.")


class RateLimiter:
    def __init__(self, limits: Mapping[str, RateLimit], algorithm: Algorithm, seed: int = 0) -> None:
        self.limits = dict(limits)
        self.algorithm = algorithm
        self.seed = seed
        self._counters: dict[tuple[str, str], Counter] = {}

    def _counter(self, key: str, bucket: str) -> Counter:
        counter = self._counters.get((key, bucket))
        if counter is None:
            limit = self.limits[bucket]
            phase = random.Random(f"{self.seed}:ratelimit:{bucket}").uniform(0, limit.window)
            if self.algorithm == "fixed":
                counter = FixedWindow(limit, phase)
            elif self.algorithm == "sliding-counter":
                counter = SlidingCounter(limit, phase)
            else:
                counter = SlidingLog(limit)
            self._counters[(key, bucket)] = counter
        return counter

    def admit(self, key: str, buckets: Iterable[str], now: float) -> Rejection | None:
        """Charge the request to all `buckets` of `key`, or to none and say why."""
        counters = [(bucket, self._counter(key, bucket)) for bucket in buckets if bucket in self.limits]
        waits = [(counter.wait(now), bucket) for bucket, counter in counters]
        worst, bucket = max(waits, default=(0.0, ""))
        if worst > 0:
            return Rejection(bucket, self.limits[bucket], worst)
        for _, counter in counters:
            counter.charge(now)
        return None

    def reset(self) -> None:
        self._counters.clear()
