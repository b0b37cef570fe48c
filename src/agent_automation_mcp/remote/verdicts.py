"""Whether the service accepts a token, asked once with a cheap call and remembered by the token's hash.

So a request with a refused token gets HTTP 401 before any tool runs, and a token costs the service one
`GET /v1/users/me` per few minutes, not one per request: the verdict is shared by every replica through Redis
(`SharedCache`), so that is once per token whatever the number of replicas. Remembered for a bounded time and
count; a question the service could not answer (down, slow, rate-limited) is not remembered, and the request
goes on: the tool's own call then meets the same answer and reports it in the one error shape.

The check is a request made with the tenant's own token, which the service counts against that token's
limits, so it is paced in the token's `standard` bucket like any other request: pacing it apart would let
the service see more than the limit. A token never accepted before first spends from the strangers' budget
(`strangers.py`), so random tokens cannot become an unbounded stream of checks.
"""

from __future__ import annotations

import logging
from typing import Final

from .. import tracing
from ..api.client import AgentAutomationClient
from ..api.credentials import Credentials
from ..api.errors import ApiError, AuthenticationError
from ..api.transport import ApiTransport
from ..caching import SharedCache, SharedStore
from ..logs import tenant_id
from .strangers import StrangerBudget

logger = logging.getLogger(__name__)

ACCEPTED_SECONDS: Final = 300.0
REFUSED_SECONDS: Final = 60.0  # shorter: a token just created should start working soon
KNOWN_SECONDS: Final = 7 * 86_400.0  # a token once accepted is re-checked without spending the strangers' budget
MAX_TOKENS: Final = 10_000
CHECK_SECONDS: Final = 10.0


class TokenVerdicts:
    def __init__(self, store: SharedStore | None = None, budget: StrangerBudget | None = None,
                 max_entries: int = MAX_TOKENS) -> None:
        store = store or SharedStore()
        self._verdicts: SharedCache[bool] = SharedCache(store, "verdict", max_entries)
        self._known: SharedCache[bool] = SharedCache(store, "known", max_entries)
        self.budget = budget or StrangerBudget(store)

    async def accepted(self, transport: ApiTransport, token: str, address: str | None) -> bool:
        """The verdict; `OverBudget` when the token is unknown and `address` (or everyone) has no checks left."""
        credentials = Credentials(token)
        asked = False

        async def ask() -> tuple[bool, float] | None:
            nonlocal asked
            asked = True
            return await self._ask(transport, credentials, address)

        with tracing.span("gate token check") as span:
            verdict = await self._verdicts.remembered(credentials.token_key, ask, fetch_seconds=CHECK_SECONDS)
            tracing.note(span, {"agent_automation.token.asked": asked, "agent_automation.token.verdict":
                                "unknown" if verdict is None else "accepted" if verdict else "refused"})
        return True if verdict is None else verdict  # no answer: let the request through

    async def _ask(self, transport: ApiTransport, credentials: Credentials,
                   address: str | None) -> tuple[bool, float] | None:
        key = credentials.token_key
        if await self._known.get(key) is None:
            with tracing.span("gate strangers budget"):  # raises OverBudget when spent: the span's error.type
                await self.budget.spend(address)
        client = AgentAutomationClient(transport, credentials).within(CHECK_SECONDS)
        try:
            await client.get_current_user()
        except AuthenticationError:
            logger.info("the service refused token %s", tenant_id(key))
            _observe(transport, False)
            return False, REFUSED_SECONDS
        except ApiError as exc:
            logger.info("could not check token %s (%s); letting the request through", tenant_id(key), exc.kind)
            _observe(transport, None)
            return None
        await self._known.put(key, True, KNOWN_SECONDS)
        _observe(transport, True)
        return True, ACCEPTED_SECONDS


def _observe(transport: ApiTransport, verdict: bool | None) -> None:
    if transport.observer is not None:
        transport.observer.token_checked(verdict)
