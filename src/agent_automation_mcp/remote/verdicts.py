"""Whether the service accepts a token, asked once with a cheap call and remembered by the token's hash.

So a request with a refused token gets HTTP 401 before any tool runs, and a token costs the service one
`GET /v1/users/me` per few minutes, not one per request: the verdict is shared by every replica through Redis
(`SharedCache`), so that is once per token whatever the number of replicas. Remembered for a bounded time and
count; a question the service could not answer (down, slow, rate-limited) is not remembered, and the request
goes on: the tool's own call then meets the same answer and reports it in the one error shape.

The check is a request made with the tenant's own token, which the service counts against that token's
limits, so it is paced in the token's `standard` bucket like any other request: pacing it apart would let
the service see more than the limit. A token never accepted before first spends from the `strangers` budget
(`budgets.py`), so random tokens cannot become an unbounded stream of checks.
"""

from __future__ import annotations

import logging
from typing import Final, NamedTuple

from .. import tracing
from ..api.client import AgentAutomationClient
from ..api.credentials import Credentials
from ..api.errors import ApiError, AuthenticationError
from ..api.transport import ApiTransport
from ..caching import SharedCache, SharedStore
from ..config import DEFAULT_TOKEN_CHECKS_PER_ADDRESS, DEFAULT_TOKEN_CHECKS_TOTAL
from ..logs import tenant_id
from .budgets import AddressBudgets, Budget
from .organizations import AllowedOrganizations

logger = logging.getLogger(__name__)

ACCEPTED_SECONDS: Final = 300.0
REFUSED_SECONDS: Final = 60.0  # shorter: a token just created should start working soon
KNOWN_SECONDS: Final = 7 * 86_400.0  # a token once accepted is re-checked without spending the strangers' budget
MAX_TOKENS: Final = 10_000
CHECK_SECONDS: Final = 10.0
STRANGERS: Final = "strangers"


def strangers_budget(per_address: int = DEFAULT_TOKEN_CHECKS_PER_ADDRESS,
                     total: int = DEFAULT_TOKEN_CHECKS_TOTAL) -> Budget:
    """Checks of tokens never accepted before, per client address and in total, per minute."""
    return Budget(STRANGERS, per_address, total)


class Verdict(NamedTuple):
    """The service's answer about a token, and (with `AGENT_AUTOMATION_ALLOWED_ORGS`) the served organisations it
    sees: `accepted` False for a refused token, `served` () for one that sees none of them. A tuple, so the shared
    cache stores it as a JSON list."""

    accepted: bool
    served: tuple[int, ...] | None = None  # None: no allowed list, every organisation is served

    @property
    def admitted(self) -> bool:
        return self.accepted and self.served != ()


UNDECIDED: Final = Verdict(True)  # the service could not answer: the request goes on, the tool meets the same answer


class TokenVerdicts:
    def __init__(self, store: SharedStore | None = None, budgets: AddressBudgets | None = None,
                 max_entries: int = MAX_TOKENS, organizations: AllowedOrganizations | None = None) -> None:
        store = store or SharedStore()
        self.organizations = organizations or AllowedOrganizations()
        # The allowed list names the cache: a verdict made under another list is never reused.
        self._verdicts: SharedCache[Verdict] = SharedCache(
            store, f"verdict:{self.organizations.fingerprint}", max_entries,
            decode=lambda value: Verdict(value[0], None if value[1] is None else tuple(value[1])))
        self._known: SharedCache[bool] = SharedCache(store, "known", max_entries)
        self.budgets = budgets or AddressBudgets(store, [strangers_budget()])

    async def verdict(self, transport: ApiTransport, token: str, address: str | None, *,
                      vouched: bool = False) -> Verdict:
        """The verdict; `OverBudget` when the token is unknown and `address` (or everyone) has no checks left.
        A `vouched` token (a sign-in's, checked when it was made) spends no stranger's check."""
        credentials = Credentials(token)
        asked = False

        async def ask() -> tuple[Verdict, float] | None:
            nonlocal asked
            asked = True
            return await self._ask(transport, credentials, address, vouched)

        with tracing.span("gate token check") as span:
            verdict = await self._verdicts.remembered(credentials.token_key, ask, fetch_seconds=CHECK_SECONDS)
            tracing.note(span, {"agent_automation.token.asked": asked, "agent_automation.token.verdict":
                                "unknown" if verdict is None else "accepted" if verdict.admitted else "refused"})
        return UNDECIDED if verdict is None else verdict

    async def _ask(self, transport: ApiTransport, credentials: Credentials, address: str | None,
                   vouched: bool) -> tuple[Verdict, float] | None:
        key = credentials.token_key
        if not vouched and await self._known.get(key) is None:
            with tracing.span("gate strangers budget"):  # raises OverBudget when spent: the span's error.type
                await self.budgets.spend(STRANGERS, address)
        client = AgentAutomationClient(transport, credentials).within(CHECK_SECONDS)
        try:
            await client.get_current_user()
            served = None
            if self.organizations.restricted:
                page = await client.list_organizations(limit=100)
                served = tuple(org.id for org in page.items if self.organizations.allows(org.id))
        except AuthenticationError:
            logger.info("the service refused token %s", tenant_id(key))
            _observe(transport, False)
            return Verdict(False), REFUSED_SECONDS
        except ApiError as exc:
            logger.info("could not check token %s (%s); letting the request through", tenant_id(key), exc.kind)
            _observe(transport, None)
            return None
        await self._known.put(key, True, KNOWN_SECONDS)
        _observe(transport, True)
        if served == ():
            logger.info("token %s sees none of the allowed organisations", tenant_id(key))
        return Verdict(True, served), ACCEPTED_SECONDS


def _observe(transport: ApiTransport, verdict: bool | None) -> None:
    if transport.observer is not None:
        transport.observer.token_checked(verdict)
