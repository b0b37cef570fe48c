"""What the transport reports as it works (for metrics): never a token, a tenant or an organisation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class TransportObserver(Protocol):
    def paced(self, seconds: float) -> None:
        """A request waited this long for its turn under the rate limits."""
        ...

    def upstream(self, buckets: Sequence[str], status: str) -> None:
        """A request went to the service, counted against `buckets`; `status` is the HTTP status or what
        happened instead (`timeout`, `connection`)."""
        ...

    def token_checked(self, verdict: bool | None) -> None:
        """The service was asked whether a token is valid: accepted (True), refused (False), no answer (None)."""
        ...

    def verdict_recalled(self) -> None:
        """A request was served on its token's earlier verdict, the service not answering its check."""
        ...
