"""The pacing rule, on a clock value: pure, so it can be tested without sleeping.

"At most N sends in any W seconds", kept exactly (a log of the last N send times) plus a margin, is the
most permissive rule that is still safe against a fixed window of any alignment and against a sliding log,
whatever window the service keeps. The one server model it cannot satisfy, the sliding-window
counter, is learned from its first 429: the bucket switches to even spacing and pauses until Retry-After.
The Redis script (`acquire.lua`, `penalise.lua`) applies the same rule with the same constants.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from ..api.limits import RateLimit

HOT_STAGGER: Final = 0.25  # a hot bucket spreads each window's sends over this share of it (see `stagger`)
# Bulk readers (trace paging) may fill this share of a bucket; the rest stays for interactive calls. 5/6 of 60
# is 50, so a 100-page trace still takes the optimum two windows while 10 slots per window stay free.
BULK_SHARE: Final = 5 / 6
SPACING_SECONDS: Final = 3600.0  # how long a bucket keeps even spacing after a 429
# While spacing, each send has a slot, one interval after the previous slot; a send that leaves at most this
# share of the interval after its slot keeps it, so wake-up and round-trip delays do not add up send after
# send (a later one starts the slots anew). Any window still holds at most N sends, as without it: the slots
# are an interval apart and each send leaves less than one interval after its own.
CATCH_UP: Final = 0.25
MIN_PAUSE: Final = 1.0  # Retry-After is clamped to [MIN_PAUSE, MAX_PAUSE]; a 0 would only invite another 429
MAX_PAUSE: Final = 120.0
BACKOFF_CAP: Final = 30.0  # without Retry-After: full-jitter exponential backoff, 1 s, 2 s, 4 s ... capped here
STRIKE_MEMORY: Final = 60.0  # a 429 this long after the previous one starts the backoff over


def bulk_cap(limit: RateLimit) -> int:
    """How many of a bucket's sends bulk callers may take in one window, leaving room for interactive ones."""
    return max(1, math.floor(limit.count * BULK_SHARE))


def spacing_interval(limit: RateLimit) -> float:
    """Even spacing safe against a sliding-window counter, which still counts most of the last window's burst.

    N-1 sends per window keep a counter's estimate a whole request below N whatever its rounding; the margin
    is not added here, since a counter weighs sends by position and a little jitter cannot add a request.
    """
    return limit.window / max(1, limit.count - 1)


def catch_up(limit: RateLimit) -> float:
    return CATCH_UP * spacing_interval(limit)


def stagger(limit: RateLimit) -> float:
    """The least gap between sends of a hot bucket (N sends in the last two windows).

    Only there can a sliding-window counter refuse a send the log allows; spreading those sends lets its first
    429 come back before many more leave. Throughput is unchanged: each window still takes N sends.
    """
    return HOT_STAGGER * limit.window / limit.count


def clamp_pause(retry_after: float) -> float:
    return min(MAX_PAUSE, max(MIN_PAUSE, retry_after))


def backoff(strikes: int, rng: random.Random | None = None) -> float:
    """Full jitter on 1 s · 2^(strikes-1), never below MIN_PAUSE: a 429 we did not expect, and no Retry-After."""
    ceiling = min(BACKOFF_CAP, 2.0 ** max(0, strikes - 1))
    return max(MIN_PAUSE, (rng or random).uniform(0.0, ceiling))


@dataclass(slots=True)
class BucketLog:
    """One (token, bucket): its recent send times and what the last 429s taught us.

    Each send of this process counts `weight` times: a replica cut off from the others paces at 1/weight of the
    limit, on top of the sends of every replica it last saw (`mirror`).
    """

    limit: RateLimit
    margin: float
    weight: int = 1
    sends: deque[float] = field(init=False)  # oldest first, at most `limit.count`
    pause_until: float = -math.inf
    spacing_until: float = -math.inf
    strikes: int = 0
    last_429: float = -math.inf
    slot: float = -math.inf  # while spacing: when the last send was due (see CATCH_UP)
    seen: float = -math.inf  # when `sends` last mirrored the shared log

    def __post_init__(self) -> None:
        self.sends = deque(maxlen=self.limit.count)

    def ready_at(self, now: float, *, bulk: bool = False, ahead: int = 0) -> float:
        """The earliest instant the send after `ahead` queued ones may go (a lower bound when ahead > 0)."""
        span = self.limit.window + self.margin
        cap = bulk_cap(self.limit) if bulk else self.limit.count
        rounds, slot = divmod((ahead + 1) * min(self.weight, cap) - 1, cap)
        index = len(self.sends) - cap + slot  # the send whose window must pass first
        ready = self.sends[index] + span if index >= 0 else now
        ready = max(now, ready + rounds * span, self.pause_until)
        if self.spacing_until > now:
            ready = max(ready, self._spaced_from() + (ahead + 1) * self.weight * spacing_interval(self.limit))
        elif self.busy(now):
            ready = max(ready, self.sends[-1] + (ahead + 1) * self.weight * stagger(self.limit))
        return ready

    def charge(self, at: float) -> None:
        if self.spacing_until > at:
            due = self._spaced_from() + self.weight * spacing_interval(self.limit)
            self.slot = due if at - due <= self.weight * catch_up(self.limit) else at
        self.sends.extend([at] * self.weight)

    def mirror(self, sends: Iterable[float], pause_until: float, spacing_until: float, at: float) -> None:
        """Take the shared log as every replica left it (oldest first, on this clock), seen at `at`."""
        self.sends.clear()
        self.sends.extend(sends)
        self.pause_until, self.spacing_until, self.seen = pause_until, spacing_until, at

    def assume_taken(self, now: float) -> None:
        """The shared log is lost at `now`: the room that freed since it was last seen may have gone to other
        replicas, unseen here, so count it as taken now."""
        span = self.limit.window + self.margin
        freed = sum(1 for sent in self.sends if self.seen < sent + span <= now)
        self.sends.extend([now] * freed)

    def _spaced_from(self) -> float:
        """When the last send was due: its slot, if it has one, else when it left."""
        last = self.sends[-1] if self.sends else -math.inf
        return self.slot if self.slot >= last - self.weight * catch_up(self.limit) else last

    def busy(self, now: float) -> bool:
        """N sends in the last two windows: only then can this bucket be why a window server said 429."""
        return len(self.sends) == self.limit.count and self.sends[0] > now - 2 * self.limit.window - self.margin

    def penalise(self, now: float, retry_after: float | None, rng: random.Random | None = None) -> float:
        """Switch to even spacing and pause; return the pause in seconds."""
        self.strikes = self.strikes + 1 if now - self.last_429 <= STRIKE_MEMORY else 1
        self.last_429 = now
        pause = clamp_pause(retry_after) if retry_after is not None else backoff(self.strikes, rng)
        self.pause_until = max(self.pause_until, now + pause)
        self.spacing_until = now + SPACING_SECONDS
        return self.pause_until - now

    def idle(self, now: float) -> bool:
        """Nothing here can affect a future send any more, so the log may be forgotten."""
        last = self.sends[-1] if self.sends else -math.inf
        return max(last + 2 * self.limit.window + self.margin, self.pause_until, self.spacing_until) <= now


def ready_at(logs: Iterable[BucketLog], now: float, *, bulk: bool = False, ahead: int = 0) -> float:
    """When every bucket allows one more send: all or nothing."""
    return max((log.ready_at(now, bulk=bulk, ahead=ahead) for log in logs), default=now)


def try_charge(logs: list[BucketLog], now: float, *, bulk: bool = False) -> float:
    """Charge every bucket at `now` if all have room and return 0; otherwise charge none and return the wait."""
    wait = ready_at(logs, now, bulk=bulk) - now
    if wait > 0:
        return wait
    for log in logs:
        log.charge(now)
    return 0.0


def penalise(logs: list[BucketLog], now: float, retry_after: float | None,
             rng: random.Random | None = None) -> float:
    """Adapt the buckets that can explain a 429 and return the pause.

    The 429 came from a bucket the refused request was charged to: those that were full lately can explain it.
    When none can, it is put down to the tightest of them alone (the operation's own, such as agent_creation,
    not standard, which every operation shares), so that one unexplained answer never pauses every tool.
    """
    suspects = [log for log in logs if log.busy(now)] or [min(logs, key=lambda log: log.limit.count / log.limit.window)]
    return max((log.penalise(now, retry_after, rng) for log in suspects), default=0.0)
