"""The pacer the client calls: first come, first served per (token, bucket set), waiting instead of failing.

Waiters with the same token, buckets and kind (bulk or interactive) queue on one FIFO lock; only the head
asks the ledger, and it sleeps until the exact instant the ledger names, never polling, or until a send of its
token and buckets is settled here (an answer can free a slot earlier, or end a probe). Different bucket
sets queue apart, so a call that needs only `standard` is not held up behind one waiting for `logs`, and
bulk calls queue apart from interactive ones, which the ledger's bulk cap keeps room for. A call refused for want
of time says why: the service's own 429 (`service_refusals`) while its pause holds the call back, else this server's
pacing of the token's limits.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import anyio

from ..api.errors import RateLimitError
from ..api.limits import RateLimit, named_limits
from ..api.pacer import REQUEST_SECONDS, Receipt, StoreState
from ..caching import SharedStore
from .ledger import Ledger, Outcome, check_buckets
from .service_refusals import ServiceRefusal, ServiceRefusals

WAKE_JITTER: Final = 0.0005  # seconds; spreads the heads of several queues or replicas that wake at one instant
# A bucket whose wait reaches this near the end of the service's pause is held back by that pause, not by its limit.
PAUSE_SLACK: Final = 1.0


@dataclass(slots=True)
class _Queue:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    tickets: dict[int, None] = field(default_factory=dict)  # waiters in arrival order (dicts keep it)
    settled: anyio.Event = field(default_factory=anyio.Event)  # set when a send of these buckets is settled

    def ahead_of(self, ticket: int) -> int:
        return next(i for i, t in enumerate(self.tickets) if t == ticket)


class FifoPacer:
    """Implements `agent_automation_mcp.api.pacer.Pacer` over any `Ledger`."""

    def __init__(self, ledger: Ledger, limits: Mapping[str, RateLimit],
                 refusals: ServiceRefusals | None = None) -> None:
        self.ledger = ledger
        self.limits = dict(limits)
        self.refusals = refusals or ServiceRefusals(SharedStore())
        self._queues: dict[tuple[str, tuple[str, ...], bool], _Queue] = {}
        self._tickets = itertools.count()

    async def acquire(self, token_key: str, buckets: Sequence[str], deadline: float | None, *,
                      bulk: bool = False) -> Receipt:
        names = check_buckets(self.limits, buckets)
        key = (token_key, names, bulk)
        queue = self._queues.get(key) or self._queues.setdefault(key, _Queue())
        ticket = next(self._tickets)
        queue.tickets[ticket] = None
        try:
            ahead = queue.ahead_of(ticket)
            if ahead:  # give up now if even the best case is past the deadline
                await self._check_deadline(token_key, names, bulk,
                                           await self.ledger.estimate(token_key, names, bulk=bulk, ahead=ahead),
                                           deadline)
            # The head of the queue takes the free lock whatever is left; the others wait for it while that leaves
            # time for the request.
            patience = None if deadline is None or not ahead else deadline - REQUEST_SECONDS - time.monotonic()
            with anyio.move_on_after(patience) as waited:
                await queue.lock.acquire()
            if waited.cancelled_caught:
                wait = await self.ledger.estimate(token_key, names, bulk=bulk, ahead=queue.ahead_of(ticket))
                raise await self._too_long(token_key, names, bulk, wait)
            try:
                while True:
                    queue.settled = anyio.Event()  # before asking: a settle while the ledger answers is not missed
                    charged = await self.ledger.charge(token_key, names, bulk=bulk)
                    if isinstance(charged, Receipt):
                        return charged
                    await self._check_deadline(token_key, names, bulk, charged, deadline)
                    with anyio.move_on_after(charged + random.uniform(0, WAKE_JITTER)):
                        await queue.settled.wait()
            finally:
                queue.lock.release()
        finally:
            del queue.tickets[ticket]
            if not queue.tickets:
                del self._queues[key]

    async def settled(self, receipt: Receipt, status: int | None) -> None:
        outcome: Outcome = "unanswered" if status is None else "refused" if status == 429 else "admitted"
        await self.ledger.settle(receipt, outcome)
        for (token_key, names, _), queue in self._queues.items():
            if token_key == receipt.token_key and not set(names).isdisjoint(receipt.buckets):
                queue.settled.set()

    async def rate_limited(self, token_key: str, buckets: Sequence[str], retry_after: float | None) -> float:
        names = check_buckets(self.limits, buckets)
        pause = await self.ledger.penalise(token_key, names, retry_after)
        await self.refusals.noted(token_key, names, retry_after, pause)  # the pause's cause, for the calls it holds
        return pause

    async def store_state(self) -> StoreState | None:
        return await self.ledger.store_state()

    async def aclose(self) -> None:
        await self.ledger.aclose()

    async def _check_deadline(self, token_key: str, buckets: tuple[str, ...], bulk: bool, wait: float,
                              deadline: float | None) -> None:
        if deadline is not None and time.monotonic() + wait + REQUEST_SECONDS > deadline:
            raise await self._too_long(token_key, buckets, bulk, wait)

    async def _too_long(self, token_key: str, buckets: tuple[str, ...], bulk: bool, wait: float) -> RateLimitError:
        """Why a send cannot go within its call: the service's own 429, while its pause holds these buckets back (with
        the service's wait), else the token's limits as this server paces them."""
        refusal = await self.refusals.last(token_key)
        held = await self._held(token_key, buckets, bulk, refusal) if refusal is not None else ()
        if refusal is not None and held:
            now = time.time()
            asked = (f"asked to wait {refusal.asked:.0f} s" if refusal.asked is not None else
                     "did not say how long to wait")
            return RateLimitError(
                f"the service refused a request of this API token {max(0.0, now - refusal.at):.0f} s ago (429) and "
                f"{asked}; until then this server holds back every request counted against "
                f"{named_limits(self.limits, held)}, this one too: nothing was sent",
                retry_after=round(max(wait, refusal.until - now), 3), limits=held,
                hint="Nothing was sent. Call again after retry_after_seconds (the service's own wait), or tell the "
                     "user.")
        limits = ", ".join(f"{name} {self.limits[name]}" for name in buckets)
        return RateLimitError(
            f"the API token's rate limit ({limits}) allows this request in {wait:.1f}s, too late to send it within "
            f"this call's time budget; nothing was sent", retry_after=round(wait, 3), limits=buckets,
            hint="Nothing was sent. Wait retry_after_seconds, then call again (or ask for less at once).")

    async def _held(self, token_key: str, buckets: tuple[str, ...], bulk: bool,
                    refusal: ServiceRefusal) -> tuple[str, ...]:
        """Those of `buckets` that the refusal's pause holds back: counted against by the refused request, and
        waiting until about the pause's end."""
        until = refusal.paused_until - time.time() - PAUSE_SLACK
        return tuple([bucket for bucket in buckets if bucket in refusal.buckets
                      and await self.ledger.estimate(token_key, (bucket,), bulk=bulk, ahead=0) >= until])
