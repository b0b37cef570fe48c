"""Send logs in Redis, shared by every replica, so N replicas on one token together stay within its limits.

Each check-and-charge is one server-side script over all of a request's buckets, timed by Redis' own
clock, so replicas whose clocks disagree cannot skew a window. Keys carry the token's hash and a hash tag
(`aamcp:{<token_key>}:<bucket>`), so a token's keys share one Cluster slot and never show the token.
Each answer is one small reply: send now (and the bound the send was logged with) or the seconds to wait.
If Redis cannot be reached, this replica keeps serving from a local ledger: once the window in which the others may
have used the whole limit has passed, at 1/max_replicas of each limit, which stays within the limit as long as no
more replicas than that run; and it tries Redis again shortly (see `RedisLedger`).
"""

from __future__ import annotations

import bisect
import logging
import math
import random
import time
import uuid
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib.resources import files
from typing import Final, Literal

import anyio
from redis.asyncio import Redis

from ..api.limits import RateLimit
from ..api.pacer import Receipt, StoreState
from ..caching import KEY_PREFIX, MARKER_KEY
from ..redis_pool import UNREACHABLE
from . import sliding_log
from .ledger import Outcome
from .memory import MemoryLedger

logger = logging.getLogger(__name__)

RETRY_REDIS_AFTER: Final = 2.0  # seconds of local pacing before Redis is tried again
# After Redis is back, a replica keeps its local share as well for this many times RETRY_REDIS_AFTER (8 s): by then
# every replica serving calls has tried Redis again and carried its sends into it (a call waiting on the local share
# wakes to try it when due), and so has one without calls, at its next readiness probe (every 5 s in the shipped
# Deployment; `/readyz` asks Redis too).
REJOIN_TRIES: Final = 4
# Rounds of carrying sends into Redis when it is back: calls that find one under way pace locally, and the sends
# they make go in the next round (one round trip each, so a round rarely finds any; past the last, one would wait
# for the next outage).
CARRY_ROUNDS: Final = 4
SWEEP_EVERY: Final = 60.0  # seconds between passes that forget what this replica sent on idle tokens
_US: Final = 1_000_000
_ACQUIRE: Final = files(__package__).joinpath("acquire.lua").read_text()
_PENALISE: Final = files(__package__).joinpath("penalise.lua").read_text()
_CARRY: Final = files(__package__).joinpath("carry.lua").read_text()
_SETTLE: Final = files(__package__).joinpath("settle.lua").read_text()
_EPOCH: Final = files(__package__).joinpath("epoch.lua").read_text()
_OUTCOMES: Final[dict[Outcome | Literal["never sent"], int]] = {  # as settle.lua numbers them
    "admitted": 0, "refused": 1, "unanswered": 2, "never sent": 3}
_FORGOTTEN: Final = 2  # acquire.lua's answer when Redis lacks sends of ours

Route = Literal["shared", "rejoining", "local"]


def _sooner(wait: float, at: float) -> float:
    """`wait`, or the seconds until `at` (`time.monotonic()`) if that comes first: when to ask the ledger again. Never
    0, which a waiting call would spin on."""
    return min(wait, max(at - time.monotonic(), 0.001))


def bucket_keys(token_key: str, buckets: Sequence[str]) -> list[str]:
    """Per bucket its log and its mode hash; the `{...}` hash tag keeps one token's keys in one slot."""
    keys = []
    for bucket in buckets:
        log = f"{KEY_PREFIX}:{{{token_key}}}:{bucket}"
        keys += [log, f"{log}:mode"]
    return keys


@dataclass(slots=True)
class _Sent:
    """This replica's own sends on one (token, bucket): to give Redis back should it come back without them."""

    own: deque[float] = field(default_factory=deque)  # this replica's bounds of the last two windows, oldest first
    unshared: list[float] = field(default_factory=list)  # those of them Redis does not hold, oldest first
    # Those Redis logged, on Redis' clock (microseconds): each has a bound there at or after it (see acquire.lua).
    held: list[int] = field(default_factory=list)

    def add(self, bound: float, keep: float, *, shared: bool) -> None:
        self.own.append(bound)
        while self.own[0] < bound - keep:
            self.own.popleft()
        if not shared:
            self.unshared = [*(t for t in self.unshared if t >= bound - keep), bound]

    def hold(self, logged: Iterable[int], keep: float) -> None:
        for t in logged:
            bisect.insort(self.held, t)  # at the end but for sends carried in after an outage
        del self.held[:bisect.bisect_left(self.held, self.held[-1] - round(keep * _US))]


class RedisLedger:
    """A `Ledger` in Redis, falling back to local pacing while Redis is unreachable.

    While Redis answers, this replica keeps per bucket it touches its own sends of the last two windows. Cut off, it
    counts every window, of every token, as filled to the limit when it lost Redis (the others paced at the full
    limit until then, unseen here), and each of its own sends `max_replicas` times on top: its share, from a window
    on. When Redis answers again, this replica carries into it the sends it made meanwhile, and all its sends of the
    last two windows if Redis came back without its data (a new marker, see epoch.lua). If Redis kept its data and
    came back before any replica could send without it (`_silent_until`), Redis alone paces again at once; else for
    REJOIN_TRIES tries more (seconds, while other replicas find Redis back and carry theirs) a send must pass both
    Redis and the local share first.
    """

    def __init__(self, redis: Redis, limits: Mapping[str, RateLimit], *, margin: float, max_replicas: int) -> None:
        self.limits = dict(limits)
        self.margin = margin
        self.local = MemoryLedger(limits, margin=margin, weight=max(1, max_replicas))
        self.max_replicas = max_replicas
        # The replica's one client (redis_pool.py: its timeouts, its one retry on a broken connection).
        where = redis.connection_pool.connection_kwargs
        self._where = ":".join(str(where.get(k, "")) for k in ("host", "port", "path")).strip(":")
        self._redis = redis
        self._acquire = self._redis.register_script(_ACQUIRE)
        self._penalise = self._redis.register_script(_PENALISE)
        self._carry = self._redis.register_script(_CARRY)
        self._settle = self._redis.register_script(_SETTLE)
        self._epoch = self._redis.register_script(_EPOCH)
        self._marker: bytes | None = None  # the marker of Redis' data when last reached; None: never reached
        self._retry_redis_at: float | None = None  # set while Redis is unreachable
        self._rejoined_until: float | None = None  # set while pacing at the share after Redis came back
        self._answered_at = -math.inf  # when a call Redis answered was made (time.monotonic()): Redis ran it after
        self._shortest_window = min(limit.window for limit in self.limits.values())
        self._sent: dict[str, dict[str, _Sent]] = {}  # token -> bucket -> its own sends there
        self._next_sweep = time.monotonic() + SWEEP_EVERY
        self._carrying = False  # a call is handing Redis those sends
        self._restoring = False  # Redis was found to lack our sends, which are marked unshared already
        self._reaching = anyio.Lock()  # the first contact, which learns the marker
        self._rejoining = anyio.Lock()

    @property
    def degraded(self) -> bool:
        """Pacing locally at this replica's share."""
        return self._retry_redis_at is not None or self._rejoined_until is not None

    async def charge(self, token_key: str, buckets: Sequence[str], *, bulk: bool) -> Receipt | float:
        route = await self._route()
        if route != "local":
            try:
                shared = await self._charge_shared(token_key, buckets, bulk, route)
            except UNREACHABLE as exc:
                self._lost(exc)
            else:
                if shared is not None:
                    return shared
        charged = await self.local.charge(token_key, buckets, bulk=bulk)
        if isinstance(charged, Receipt):
            if charged.local is not None:
                self._sent_own(token_key, buckets, charged.local, shared=False)
            return charged
        if self._retry_redis_at is not None and not self._carrying:
            # Ask again when Redis is due: a replica whose calls all wait on its share (up to a window) still tries
            # Redis and carries its sends within RETRY_REDIS_AFTER of its return, inside the others' grace, readiness
            # probes or not.
            return _sooner(charged, self._retry_redis_at)
        return charged

    async def settle(self, receipt: Receipt, outcome: Outcome) -> None:
        """Settle the send in each ledger it was logged in. In Redis only while Redis answers; else (or should
        this fail) the send keeps its bound there, which is safe. Bounds not yet carried into Redis stay too."""
        await self.local.settle(receipt, outcome)
        if receipt.shared is not None and self._retry_redis_at is None:
            await self._settle_shared(receipt.token_key, receipt.buckets, receipt.shared, outcome)

    async def estimate(self, token_key: str, buckets: Sequence[str], *, bulk: bool, ahead: int) -> float:
        if await self._route() == "shared":
            try:
                keys, args = bucket_keys(token_key, buckets), self._args(token_key, buckets, bulk, 0, ahead)
                asked = time.monotonic()
                answer, wait = await self._acquired(keys, args)
                self._answered(asked)
                if answer == _FORGOTTEN:
                    self._forgotten()
                else:
                    return wait / _US
            except UNREACHABLE as exc:
                self._lost(exc)
        return await self.local.estimate(token_key, buckets, bulk=bulk, ahead=ahead)

    async def penalise(self, token_key: str, buckets: Sequence[str], retry_after: float | None) -> float:
        if await self._route() != "local":
            pause = -1 if retry_after is None else round(sliding_log.clamp_pause(retry_after) * _US)
            args = [pause, random.random(), *(round(x * _US) for x in (
                sliding_log.SPACING_SECONDS, sliding_log.STRIKE_MEMORY, sliding_log.MIN_PAUSE,
                sliding_log.BACKOFF_CAP))]
            for bucket in buckets:
                args += [self.limits[bucket].count, round(self.limits[bucket].window * _US)]
            try:
                wait: float = await self._penalise(keys=bucket_keys(token_key, buckets), args=args) / _US
            except UNREACHABLE as exc:
                self._lost(exc)
            else:  # the local ledger holds the pause too, should Redis go
                await self.local.penalise(token_key, buckets, wait)
                return wait
        return await self.local.penalise(token_key, buckets, retry_after)

    async def store_state(self) -> StoreState:
        """Whether Redis answers now, or never has since this replica started. Also a chance to rejoin Redis when
        due, so a replica without calls (readiness probes only) carries its sends back too."""
        if await self._route() != "local":
            try:
                asked = time.monotonic()
                await self._redis.ping()
                self._answered(asked)
                return "reachable"
            except UNREACHABLE as exc:
                self._lost(exc)
        return "unreachable" if self._marker is not None else "never reached"

    async def aclose(self) -> None:
        await self._redis.aclose()
        await self.local.aclose()

    async def _charge_shared(self, token_key: str, buckets: Sequence[str], bulk: bool,
                             route: Route) -> Receipt | float | None:
        """Charge in Redis, and while rejoining within the local share as well; None as `_charge`."""
        if route == "shared":
            return self._also_local(token_key, buckets, await self._charge(token_key, buckets, bulk))
        # One at a time: the local share is checked before Redis is asked, and counted after it said yes.
        async with self._rejoining:
            if wait := await self.local.estimate(token_key, buckets, bulk=bulk, ahead=0):
                return _sooner(wait, self._rejoined_until or 0.0)  # ask again when the grace ends
            return self._also_local(token_key, buckets, await self._charge(token_key, buckets, bulk))

    def _also_local(self, token_key: str, buckets: Sequence[str],
                    charged: Receipt | float | None) -> Receipt | float | None:
        """A send Redis charged counts at the local share too while that binds: while rejoining, and when another
        call lost Redis while this one's answer was on its way (the local ledger's fill may predate the send)."""
        if isinstance(charged, Receipt) and self.degraded:
            return replace(charged, local=self.local.record(token_key, buckets).local)
        return charged

    async def _charge(self, token_key: str, buckets: Sequence[str], bulk: bool) -> Receipt | float | None:
        """Charge in Redis; None if Redis turned out to lack sends of ours (then nothing was charged)."""
        keys = bucket_keys(token_key, buckets)
        asked = time.monotonic()
        # Shielded: once the script has run, its answer must come back, or a cancelled caller stays charged.
        with anyio.CancelScope(shield=True):
            charged, value = await self._acquired(keys, self._args(token_key, buckets, bulk, 1, 0))
        self._answered(asked)
        if charged == _FORGOTTEN:
            self._forgotten()
            return None
        if not charged:
            return max(value, 1) / _US
        try:
            await anyio.lowlevel.checkpoint()  # the caller was cancelled meanwhile: give the send back
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._settle_shared(token_key, buckets, value, "never sent")
            raise
        self._sent_own(token_key, buckets, time.monotonic() + self.margin, shared=True)
        for bucket in buckets:  # the bound Redis logged less the margin: when it charged the send, on its clock
            self._known(token_key, bucket).hold([value - round(self.margin * _US)], self._keep(bucket))
        return Receipt(token_key, tuple(buckets), shared=value)

    async def _settle_shared(self, token_key: str, buckets: Sequence[str], bound: int,
                             outcome: Outcome | Literal["never sent"]) -> None:
        try:
            await self._settle(keys=bucket_keys(token_key, buckets), args=[bound, _OUTCOMES[outcome]])
        except UNREACHABLE as exc:
            logger.debug("could not settle a send in Redis; it keeps its bound there: %s", exc)

    async def _acquired(self, keys: list[str], args: list[int | float]) -> tuple[int, int]:
        """acquire.lua's answer (redis-py's scripts answer untyped): 1 and the bound it logged (µs) when it charged,
        0 and the wait (µs) when it did not, or `_FORGOTTEN` when Redis lacks sends of ours."""
        charged, value = await self._acquire(keys=keys, args=args)
        return charged, value

    def _args(self, token_key: str, buckets: Sequence[str], bulk: bool, charge: int,
              ahead: int) -> list[int | float]:
        args: list[int | float] = [charge, ahead, round(self.margin * _US), round(sliding_log.PROBE_LEASE * _US)]
        sent = self._sent.get(token_key, {})
        for bucket in buckets:
            limit = self.limits[bucket]
            args += [limit.count, sliding_log.bulk_cap(limit) if bulk else limit.count, round(limit.window * _US),
                     round(sliding_log.spacing_interval(limit) * _US),
                     round(sliding_log.stagger(limit) * _US), round(sliding_log.catch_up(limit) * _US),
                     *self._held(bucket, sent.get(bucket))]
        return args

    def _held(self, bucket: str, known: _Sent | None) -> tuple[int, int]:
        """Since when, on Redis' clock, and how many of our sends Redis must hold: those of the window up to our
        newest it logged. As Redis' own times, not ours, so a call that reaches it late cannot count sends that left
        the window meanwhile (see acquire.lua). Checked while rejoining too: a Redis restarted empty during the grace
        was taken for one that holds every replica's sends once the grace ended."""
        if known is None or not known.held:
            return 0, 0
        first = bisect.bisect_left(known.held, known.held[-1] - round(self.limits[bucket].window * _US))
        return known.held[first], len(known.held) - first

    def _keep(self, bucket: str) -> float:
        """How long a send can matter to Redis: two windows and the margin (see acquire.lua)."""
        return 2 * self.limits[bucket].window + self.margin

    def _known(self, token_key: str, bucket: str) -> _Sent:
        sent = self._sent.get(token_key)
        if sent is None:
            sent = self._sent[token_key] = {}
        known = sent.get(bucket)
        if known is None:
            known = sent[bucket] = _Sent()
        return known

    def _answered(self, asked: float) -> None:
        """Redis answered a call made at `asked`: it was there, and so were the others' sends, until it ran it. Not
        counted once this replica has lost Redis meanwhile: the call may have waited out a stall, asked while the
        others were losing Redis, and run when it was over."""
        if self._retry_redis_at is None:
            self._answered_at = max(self._answered_at, asked)

    def _forgotten(self) -> None:
        """Redis answers but lacks sends of ours from its window (acquire.lua charged nothing): it restarted empty
        between two of our calls. Give it every send of ours of the last two windows at the next call, pacing
        meanwhile and for the grace after on the local share as well, as after an outage: other replicas have yet
        to find out and carry theirs."""
        logger.warning("Redis has lost recent sends (restarted empty?); this replica gives it back its own, and "
                       "paces locally as well meanwhile (%s)", self._locally)
        self.local.fill(time.monotonic())
        self._give_back_all()
        self._retry_redis_at, self._restoring = time.monotonic(), True  # due now: the next call carries them

    def _give_back_all(self) -> None:
        """Redis lacks our sends: every one of the last two windows is to be carried into it again."""
        for sent in self._sent.values():
            for known in sent.values():
                known.unshared, known.held = list(known.own), []

    def _sent_own(self, token_key: str, buckets: Sequence[str], bound: float, *, shared: bool) -> None:
        for bucket in buckets:
            self._known(token_key, bucket).add(bound, self._keep(bucket), shared=shared)
        if (now := time.monotonic()) >= self._next_sweep:
            self._sweep(now)

    def _sweep(self, now: float) -> None:
        """Forget tokens this replica has not sent on for two windows, and that Redis holds all of."""
        self._next_sweep = now + SWEEP_EVERY
        for token_key, sent in list(self._sent.items()):
            for bucket, known in list(sent.items()):
                if not known.unshared and (not known.own or known.own[-1] + self._keep(bucket) < now):
                    del sent[bucket]
            if not sent:
                del self._sent[token_key]

    async def _route(self) -> Route:
        """Where to pace now. Rejoins Redis when due (`_rejoin`)."""
        now = time.monotonic()
        if self._marker is None and self._retry_redis_at is None:
            async with self._reaching:  # the first contact: learn the marker of Redis' data
                if self._marker is None and self._retry_redis_at is None:
                    try:
                        await self._reach()
                    except UNREACHABLE as exc:
                        self._lost(exc)
        if self._retry_redis_at is not None and (now < self._retry_redis_at or self._carrying
                                                 or not await self._rejoin(now)):
            return "local"
        if self._rejoined_until is not None:
            if now < self._rejoined_until:
                return "rejoining"
            self._rejoined_until = None
            logger.warning("Pacing is shared across replicas through Redis again")
        return "shared"

    async def _rejoin(self, now: float) -> bool:
        """Carry into Redis the sends it lacks; False if it is still unreachable. Then keep the local share as well
        until every replica has had time to carry its own, unless Redis kept its data and came back before any
        replica could send without it (`_silent_until`): then it holds every send already."""
        self._carrying = True  # one attempt at a time, however long it takes; the others stay local
        try:
            lost = await self._reach() or self._restoring
            if lost and not self._restoring:
                self._give_back_all()  # Redis came back empty: every send of ours is news to it
            for _ in range(CARRY_ROUNDS):  # the sends other calls made locally meanwhile go in the next
                if not await self._carry_unshared():
                    break
        except UNREACHABLE as exc:
            self._lost(exc)
            return False
        finally:
            self._carrying = False
        self._retry_redis_at, self._restoring = None, False
        if not lost and time.monotonic() < self._silent_until():
            logger.warning("Redis is reachable again with its data, before any replica could send without it: "
                           "pacing is shared across replicas through Redis again")
            return True
        grace = REJOIN_TRIES * RETRY_REDIS_AFTER
        self._rejoined_until = now + grace
        logger.warning("Redis is reachable again, and this replica's sends it lacked are in it; keeping to "
                       "1/%d of each limit as well for another %.1fs, until every replica's are",
                       self.max_replicas, grace)
        return True

    def _silent_until(self) -> float:
        """Until when no replica can have sent a request that Redis lacks. Each lost Redis after this one's last
        answered call was made; cut off, it sends nothing for the shortest window and the margin (the local ledger's
        fill), and once Redis is back its next call (or readiness probe) tries Redis within RETRY_REDIS_AFTER,
        carrying whatever it sent."""
        return self._answered_at + self._shortest_window + self.margin - RETRY_REDIS_AFTER

    async def _reach(self) -> bool:
        """Learn the marker of Redis' data; say whether it differs from the one last seen (Redis lost its data)."""
        marker = await self._epoch(keys=[MARKER_KEY], args=[uuid.uuid4().hex])
        lost = self._marker is not None and marker != self._marker
        self._marker = marker
        return lost

    @property
    def _locally(self) -> str:
        return (f"a window's pause, as the other replicas may have used the whole limit meanwhile, then 1/"
                f"{self.max_replicas} of each limit")

    def _lost(self, exc: BaseException) -> None:
        now = time.monotonic()
        if not self.degraded:
            if self._marker is None:
                logger.warning("Redis is unreachable (%s: %s) at %s, and has not answered since this replica "
                               "started: check AGENT_AUTOMATION_REDIS_URL. Pacing locally until it answers: %s",
                               type(exc).__name__, exc, self._where, self._locally)
            else:
                logger.warning("Redis is unreachable (%s: %s); pacing locally until it is back: %s",
                               type(exc).__name__, exc, self._locally)
        if self._retry_redis_at is None:  # it paced through Redis until now: the others may have filled any window
            self.local.fill(now)
        self._rejoined_until = None
        self._retry_redis_at = now + RETRY_REDIS_AFTER

    async def _carry_unshared(self) -> int:
        """Hand Redis the sends it lacks, one script per token (a token's keys share one Cluster slot); say how
        many."""
        now, count = time.monotonic(), 0
        for token_key, sent in list(self._sent.items()):
            carried = {bucket: list(known.unshared) for bucket, known in sent.items() if known.unshared}
            if not carried:
                continue
            buckets = sorted(carried)
            ages = {bucket: [round((now - t) * _US) for t in carried[bucket]] for bucket in buckets}
            args: list[int | float] = [round(self.margin * _US)]
            for bucket in buckets:
                limit = self.limits[bucket]
                args += [limit.count, round(limit.window * _US), len(ages[bucket]), *ages[bucket]]
            logged = await self._carry(keys=bucket_keys(token_key, buckets)[::2], args=args)
            for bucket in buckets:  # sends made while this awaited stay unshared
                known, done = sent[bucket], set(carried[bucket])
                known.unshared = [t for t in known.unshared if t not in done]
                known.hold((logged - age for age in ages[bucket]), self._keep(bucket))  # at Redis' now less each age
                count += len(done)
        return count
