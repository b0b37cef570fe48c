"""The pacing rule, on a clock value: pure, so it can be tested without sleeping.

"At most N sends in any W seconds", kept exactly, is the most permissive rule that is still safe against a
fixed window of any alignment and against a sliding log, whatever window the service keeps. The log holds, per
send, the latest instant the service can have stamped it: its departure plus a margin (the service's own
queueing), lowered to the instant its answer came back once it has (the service stamps a request before it
answers). A send may go once N of those bounds are W behind it.

The one server model the log cannot satisfy, the sliding-window counter, is learned from its first 429: the
bucket pauses (Retry-After, or a backoff), then sends one probe at a time until one is accepted, then spaces
its sends evenly. The Redis scripts (`acquire.lua`, `penalise.lua`, `settle.lua`) apply the same rule with the
same constants.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ..api.limits import RateLimit

if TYPE_CHECKING:
    from .ledger import Outcome

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
# While a probe is out, the bucket's next send waits for its answer at most this long: a lost answer or a dead
# replica holds the bucket back no longer than that. Well above a round trip to the service (the slowest usual
# answer takes about a second), well below a call's budget, so a slow probe is not overtaken and a lost one
# costs a call a few seconds, not its budget.
PROBE_LEASE: Final = 5.0


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
    """One (token, bucket): the stamp bounds of its recent sends and what the last 429s taught us.

    Each send of this process counts `weight` times: a replica cut off from the others paces at 1/weight of the
    limit, once the window it lost them in has passed (`fill`).
    """

    limit: RateLimit
    margin: float
    weight: int = 1
    # The latest instants the service can have stamped the recent sends, in order: the `limit.count` largest
    # (the only ones the rule reads). A settled send's bound can drop below later ones.
    sends: deque[float] = field(init=False)
    last_sent: float = -math.inf  # the newest departure: spacing and stagger are about departures
    pause_until: float = -math.inf
    spacing_until: float = -math.inf
    strikes: int = 0
    last_429: float = -math.inf
    slot: float = -math.inf  # while spacing: when the last send was due (see CATCH_UP)
    probing: bool = False  # after a 429: one send at a time until one is accepted
    probe: float | None = None  # the bound of the probe that is out
    probe_until: float = -math.inf  # when the bucket stops waiting for its answer (see PROBE_LEASE)

    def __post_init__(self) -> None:
        self.sends = deque(maxlen=self.limit.count)

    def ready_at(self, now: float, *, bulk: bool = False, ahead: int = 0) -> float:
        """The earliest instant the send after `ahead` queued ones may go (a lower bound when ahead > 0)."""
        window = self.limit.window
        cap = bulk_cap(self.limit) if bulk else self.limit.count
        rounds, slot = divmod((ahead + 1) * min(self.weight, cap) - 1, cap)
        index = len(self.sends) - cap + slot  # the send whose window must pass first
        ready = self.sends[index] + window if index >= 0 else now
        ready = max(now, ready + rounds * (window + self.margin), self.pause_until)
        if self.spacing_until > now:
            ready = max(ready, self._spaced_from() + (ahead + 1) * self.weight * spacing_interval(self.limit))
        elif self.busy(now):
            ready = max(ready, self.last_sent + (ahead + 1) * self.weight * stagger(self.limit))
        if self.probe_until > now:  # no answer to the probe yet: look again an interval on (see PROBE_LEASE)
            ready = max(ready, min(self.probe_until, now + spacing_interval(self.limit)))
        return ready

    def charge(self, at: float) -> None:
        """Log a send leaving at `at` with the bound `at + margin`; while probing, it is the probe."""
        if self.spacing_until > at:
            due = self._spaced_from() + self.weight * spacing_interval(self.limit)
            self.slot = due if at - due <= self.weight * catch_up(self.limit) else at
        bound = at + self.margin  # no smaller than any logged bound: those left earlier
        self.sends.extend([bound] * self.weight)
        self.last_sent = at
        if self.probing:
            self.probe, self.probe_until = bound, at + PROBE_LEASE

    def settle(self, bound: float, now: float, outcome: Outcome) -> None:
        """The send logged with `bound` ended at `now`. If it was answered, the service stamped it by then.

        A probe the service let through ends the probing; any other end of a probe lets the next send probe
        (after a 429 the caller has already called `penalise`, so that pause holds it back first).
        """
        if outcome != "unanswered" and now < bound:
            # Only bounds at or after `now` can be unsettled sends of the last margin's time: lift those off the
            # end, so a long log (a large limit) costs no more than a short one, and put them back in order.
            later: list[float] = []
            while self.sends and self.sends[-1] >= now:
                later.append(self.sends.pop())
            copies = min(self.weight, later.count(bound))  # none once newer bounds pushed it out
            for _ in range(copies):
                later.remove(bound)
            self.sends.extend([now] * copies)
            self.sends.extend(reversed(later))
        if self.probe == bound:
            self.probe, self.probe_until = None, -math.inf
            self.probing = outcome != "admitted"

    def fill(self, at: float) -> None:
        """The replicas sharing this log are lost from sight at `at`: count the limit's worth of sends as made then.

        Up to then they paced on the shared log at the full limit, and this replica cannot know what they sent since
        it last heard from it (nor on tokens it never sent on): the room it saw free may all have gone, each send
        stamped by `at` plus the margin. Only a window after that can sends at this log's share go; counting less
        let as many through as the room the others had taken meanwhile (a 429 each).
        """
        self.sends.clear()
        self.sends.extend([at + self.margin] * self.limit.count)
        self.last_sent = max(self.last_sent, at)

    def _spaced_from(self) -> float:
        """When the last send was due: its slot, if it has one, else when it left."""
        last = self.last_sent
        return self.slot if self.slot >= last - self.weight * catch_up(self.limit) else last

    def busy(self, now: float) -> bool:
        """N sends in the last two windows: only then can this bucket be why a window server said 429."""
        return len(self.sends) == self.limit.count and self.sends[0] > now - 2 * self.limit.window

    def penalise(self, now: float, retry_after: float | None, rng: random.Random | None = None) -> float:
        """Switch to even spacing and pause; return the pause in seconds."""
        self.strikes = self.strikes + 1 if now - self.last_429 <= STRIKE_MEMORY else 1
        self.last_429 = now
        pause = clamp_pause(retry_after) if retry_after is not None else backoff(self.strikes, rng)
        self.pause_until = max(self.pause_until, now + pause)
        self.spacing_until = now + SPACING_SECONDS
        self.probing, self.probe, self.probe_until = True, None, -math.inf
        return self.pause_until - now

    def idle(self, now: float) -> bool:
        """Nothing here can affect a future send any more, so the log may be forgotten."""
        return max(self.last_sent + 2 * self.limit.window + self.margin, self.pause_until, self.spacing_until,
                   self.probe_until) <= now


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


def settle(logs: Iterable[BucketLog], bound: float, now: float, outcome: Outcome) -> None:
    for log in logs:
        log.settle(bound, now, outcome)


def penalise(logs: list[BucketLog], now: float, retry_after: float | None,
             rng: random.Random | None = None) -> float:
    """Adapt the buckets that can explain a 429 and return the pause.

    The 429 came from a bucket the refused request was charged to: those that were full lately can explain it.
    When none can, it is put down to the tightest of them alone (the operation's own, such as agent_creation,
    not standard, which every operation shares), so that one unexplained answer never pauses every tool.
    """
    suspects = [log for log in logs if log.busy(now)] or [min(logs, key=lambda log: log.limit.count / log.limit.window)]
    return max((log.penalise(now, retry_after, rng) for log in suspects), default=0.0)
