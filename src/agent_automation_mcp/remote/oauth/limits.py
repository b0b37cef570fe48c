"""Per-address budgets for the sign-in endpoints, so one address cannot flood registrations, consent pages or
token requests. Counted in the shared store (all replicas share one budget per address), per minute.

One sign-in costs one registration, two or three consent requests (the page, the form, perhaps the choice of
organisation) and one token request, plus refreshes: the budgets below fit `signins` of them a minute.
"""

from __future__ import annotations

from typing import Final

from .store import Store

WINDOW_SECONDS: Final = 60.0
PER_SIGNIN: Final = {"register": 1, "authorize": 3, "token": 3, "revoke": 3}


class AddressBudgets:
    def __init__(self, store: Store, signins: int) -> None:
        self.store = store
        self.budgets = {endpoint: per * signins for endpoint, per in PER_SIGNIN.items()}

    async def spend(self, endpoint: str, address: str) -> bool:
        """Count one request; False when the address has used up this minute's budget for the endpoint."""
        used = await self.store.count(f"limit:{endpoint}:{address}", WINDOW_SECONDS)
        return used <= self.budgets[endpoint]
