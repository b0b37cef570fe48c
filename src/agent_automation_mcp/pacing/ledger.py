"""Where the send logs live: this process's memory, or Redis shared by every replica."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

from ..api.limits import RateLimit
from ..api.pacer import Receipt, StoreState

# How a charged send ended: answered and let through (whatever the status), answered 429, or no answer came.
Outcome = Literal["admitted", "refused", "unanswered"]


class Ledger(Protocol):
    """Atomic check-and-charge over several buckets. Waiting and queueing are the pacer's job, not this one's."""

    async def charge(self, token_key: str, buckets: Sequence[str], *, bulk: bool) -> Receipt | float:
        """Charge one send to every bucket and return its receipt, or charge nothing and return the seconds to wait."""
        ...

    async def settle(self, receipt: Receipt, outcome: Outcome) -> None:
        """The charged send ended: if answered, lower its bound to now. Never raises."""
        ...

    async def estimate(self, token_key: str, buckets: Sequence[str], *, bulk: bool, ahead: int) -> float:
        """A lower bound on the wait of a send queued behind `ahead` others; charges nothing."""
        ...

    async def penalise(self, token_key: str, buckets: Sequence[str], retry_after: float | None) -> float:
        """Record an unexpected 429 (even spacing, pause) and return the pause in seconds."""
        ...

    async def store_state(self) -> StoreState | None:
        """Whether the shared store answers now (or never has); None for a ledger that is not shared."""
        ...

    async def aclose(self) -> None: ...


def check_buckets(limits: Mapping[str, RateLimit], buckets: Sequence[str]) -> tuple[str, ...]:
    """Sorted and de-duplicated, so a bucket set has one name; an unknown bucket is a bug in the caller."""
    unknown = set(buckets) - set(limits)
    if unknown or not buckets:
        raise ValueError(f"cannot pace unknown or empty buckets {sorted(unknown) or list(buckets)}; "
                         f"known: {', '.join(sorted(limits))}")
    return tuple(sorted(set(buckets)))
