"""What the client asks of a pacer. Implementations live in `agent_automation_mcp.pacing`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol

# A wait for a slot, or for a 429's Retry-After, is taken only if it leaves this much of the call's budget for
# the request itself (the service's slowest usual answer takes about a second); otherwise the call is answered
# at once with the wait, rather than held for a slot it could not use. A slot free now is always taken.
REQUEST_SECONDS: Final = 1.0

# The store shared with other replicas: answering, not answering now, or not once since this process started.
StoreState = Literal["reachable", "unreachable", "never reached"]


@dataclass(frozen=True, slots=True)
class Receipt:
    """One charged send, handed back to `Pacer.settled` once its answer is in.

    `local` is the stamp bound the send was logged with in this process's ledger (`time.monotonic()`), `shared`
    the one in Redis (microseconds on Redis' clock); each is None where the send was not logged.
    """

    token_key: str
    buckets: tuple[str, ...]
    local: float | None = None
    shared: int | None = None


class Pacer(Protocol):
    async def acquire(self, token_key: str, buckets: Sequence[str], deadline: float | None, *,
                      bulk: bool = False) -> Receipt:
        """Wait until one request may be charged to every bucket at once, then charge it.

        `deadline` is a `time.monotonic()` instant; when the wait would not leave time before it for the request
        itself, raise `RateLimitError` with `retry_after` set at once, without charging anything. `bulk` requests (trace
        paging) must leave room for interactive ones on the same token.
        """
        ...

    async def settled(self, receipt: Receipt, status: int | None) -> None:
        """The charged request was answered with `status` (so the service stamped it by now), or None: no answer
        came (it may or may not have reached the service). After a 429, call `rate_limited` first. Never raises."""
        ...

    async def rate_limited(self, token_key: str, buckets: Sequence[str], retry_after: float | None) -> float:
        """The service answered 429 anyway: adapt, and return the seconds to wait before a retry."""
        ...

    async def store_state(self) -> StoreState | None:
        """Whether the store shared with other replicas answers now; None when pacing is this process's alone."""
        ...

    async def aclose(self) -> None: ...
