"""The service's own 429s, remembered per token for as long as they asked to wait, so that a call this server then
holds back says why: the service refused, with its wait, not this server's limit.

The pause itself is the ledger's (`Ledger.penalise`); this is only its cause, shared by the replicas through the
store (`caching.SharedCache`, memory without Redis), so any replica's refusal names it. Times are the wall clock's:
replicas share them.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Final

from ..caching import SharedCache, SharedStore

KEPT_AFTER: Final = 5.0  # seconds a refusal is remembered past its wait and its pause, for the calls just then
MAX_TOKENS: Final = 10_000  # tokens whose last refusal this process keeps


@dataclass(frozen=True, slots=True)
class ServiceRefusal:
    """A 429 the service answered: to a request counted against `buckets`, at `at`, asking `asked` seconds (None: it
    did not say); this server then paused until `paused_until`."""

    buckets: tuple[str, ...]
    at: float
    asked: float | None
    paused_until: float

    @property
    def until(self) -> float:
        """When the service said it would take requests again (or, had it not said, when the pause ends)."""
        return self.at + self.asked if self.asked is not None else self.paused_until


class ServiceRefusals:
    """The last 429 of each token, shared by the replicas."""

    def __init__(self, store: SharedStore) -> None:
        self._cache: SharedCache[dict[str, Any]] = SharedCache(store, "service-429", MAX_TOKENS)  # as JSON holds it

    async def noted(self, token_key: str, buckets: tuple[str, ...], asked: float | None, pause: float) -> None:
        now = time.time()
        refusal = ServiceRefusal(buckets, now, asked, now + pause)
        await self._cache.put(token_key, asdict(refusal), max(refusal.until, refusal.paused_until) - now + KEPT_AFTER)

    async def last(self, token_key: str) -> ServiceRefusal | None:
        """The token's last refusal, while its wait or its pause lasts."""
        value = await self._cache.get(token_key)
        if value is None:
            return None
        refusal = ServiceRefusal(tuple(value["buckets"]), value["at"], value["asked"], value["paused_until"])
        return refusal if max(refusal.until, refusal.paused_until) > time.time() else None
