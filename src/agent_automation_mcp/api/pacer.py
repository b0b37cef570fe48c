"""What the client asks of a pacer. Implementations live in `agent_automation_mcp.pacing`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Pacer(Protocol):
    async def acquire(self, token_key: str, buckets: Sequence[str], deadline: float | None, *,
                      bulk: bool = False) -> None:
        """Wait until one request may be charged to every bucket at once, then charge it.

        `deadline` is a `time.monotonic()` instant; when the wait would pass it, raise
        `RateLimitError` with `retry_after` set, without charging anything. `bulk` requests (trace
        paging) must leave room for interactive ones on the same token.
        """
        ...

    async def rate_limited(self, token_key: str, buckets: Sequence[str], retry_after: float | None) -> float:
        """The service answered 429 anyway: adapt, and return the seconds to wait before a retry."""
        ...

    async def reachable(self) -> bool | None:
        """Whether the store shared with other replicas answers now; None when pacing is this process's alone."""
        ...

    async def aclose(self) -> None: ...
