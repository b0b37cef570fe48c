"""Whether the service accepts a token, asked once with a cheap call and remembered by the token's hash.

So a request with a refused token gets HTTP 401 before any tool runs, and a token costs the service one
`GET /v1/users/me` per few minutes, not one per request: the verdict is shared by every replica through Redis
(`SharedCache`), so that is once per token whatever the number of replicas. Remembered for a bounded time and
count.

A token whose verdict is on record from the last `RECALLED_SECONDS` (a known tenant) is served on it at once when
its verdict is due again, while the check runs behind (`recheck_in`): a slow check stalls no known tenant (it held
each for up to 10 s about every 20 s while the service was slow). A token refused meanwhile is refused from the
next request on, and the request served on the earlier verdict is made with the token itself, which the service
refuses in turn.

A check the service could not answer (down, slow, rate-limited) is sent once, never retried, and its outcome is
remembered for `UNDECIDED_RETRY_SECONDS` too, so one client request (however often a balancer sends it again) and
a burst of one token's requests cost at most one check. Meanwhile a known tenant is served on its earlier verdict
(a warning line, `agent_automation_token_verdicts_recalled_total`): an ailing service locks no known tenant out.
Any other token is undecided: without an allowed list the request goes on and the tool meets the same answer; with
one it is refused for now (`organizations.py`).

The check is a request made with the tenant's own token, which the service counts against that token's
limits, so it is paced in the token's `standard` bucket like any other request: pacing it apart would let
the service see more than the limit. A token never accepted before first spends from the `strangers` budget
(`budgets.py`), so random tokens cannot become an unbounded stream of checks; an accepted token vouches for its
client's network there.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final, NamedTuple

from anyio.abc import TaskGroup

from .. import tracing
from ..api.client import AgentAutomationClient
from ..api.credentials import Credentials
from ..api.errors import ApiError, AuthenticationError
from ..api.transport import ApiTransport
from ..caching import SharedCache, SharedStore
from ..config import ADDRESSES_PER_NETWORK, DEFAULT_TOKEN_CHECKS_PER_ADDRESS, DEFAULT_TOKEN_CHECKS_TOTAL
from ..logs import tenant_id
from ..tenancy import serve_user
from .budgets import AddressBudgets, Budget
from .organizations import UNDECIDED_RETRY_SECONDS, AllowedOrganizations

logger = logging.getLogger(__name__)

ACCEPTED_SECONDS: Final = 300.0
REFUSED_SECONDS: Final = 60.0  # shorter: a token just created should start working soon
KNOWN_SECONDS: Final = 7 * 86_400.0  # a token once accepted is re-checked without spending the strangers' budget
RECALLED_SECONDS: Final = 86_400.0  # how old a verdict may be to serve its token while the service cannot answer
MAX_TOKENS: Final = 10_000
CHECK_SECONDS: Final = 10.0
STRANGERS: Final = "strangers"
CHECKED, RECALLED, UNDECIDED_STANDING = "checked", "recalled", "undecided"
RECHECKING: Final = "rechecking"  # served on the earlier verdict while its check runs behind


def strangers_budget(per_address: int = DEFAULT_TOKEN_CHECKS_PER_ADDRESS, per_network: int | None = None,
                     total: int = DEFAULT_TOKEN_CHECKS_TOTAL) -> Budget:
    """Checks of tokens never accepted before, per client address, per network (None: `ADDRESSES_PER_NETWORK`
    addresses' worth) and, for networks nobody vouched for, in total, per minute."""
    return Budget(STRANGERS, per_address, per_network or ADDRESSES_PER_NETWORK * per_address, total)


class Verdict(NamedTuple):
    """The service's answer about a token: `accepted` False for a refused token; with `AGENT_AUTOMATION_ALLOWED_ORGS`
    the served organisations it sees (`served` () for none of them); the Codegen user it belongs to; and where the
    verdict stands: `checked` (the service's answer), `recalled` (an earlier answer, served while the service cannot
    answer), `rechecking` (an earlier answer, served while the check runs behind) or `undecided`. A tuple, so the
    shared cache stores it as a JSON list."""

    accepted: bool
    served: tuple[int, ...] | None = None  # None: no allowed list (every organisation is served), or undecided
    user: int | None = None
    standing: str = CHECKED

    @property
    def admitted(self) -> bool:
        return self.accepted and self.served != ()

    @classmethod
    def decoded(cls, value: list[Any]) -> Verdict:
        """From its JSON list; a replica of an earlier version wrote only the first two fields."""
        served = None if value[1] is None else tuple(value[1])
        return cls(value[0], served, *value[2:4])


# The service could not answer: the request goes on (the tool meets the same answer), or with an allowed list is
# refused for now.
UNDECIDED: Final = Verdict(True, standing=UNDECIDED_STANDING)


class TokenVerdicts:
    def __init__(self, store: SharedStore | None = None, budgets: AddressBudgets | None = None,
                 max_entries: int = MAX_TOKENS, organizations: AllowedOrganizations | None = None) -> None:
        store = store or SharedStore()
        self.organizations = organizations or AllowedOrganizations()
        # The allowed list names the cache: a verdict made under another list is never reused.
        self._verdicts: SharedCache[Verdict] = SharedCache(
            store, f"verdict:{self.organizations.fingerprint}", max_entries, decode=Verdict.decoded)
        # The last verdict the service gave, kept longer: what a token is served on while the service cannot answer.
        self._recalled: SharedCache[Verdict] = SharedCache(
            store, f"recalled:{self.organizations.fingerprint}", max_entries, decode=Verdict.decoded)
        self._known: SharedCache[bool] = SharedCache(store, "known", max_entries)
        self.budgets = budgets or AddressBudgets(store, [strangers_budget()])
        self._behind: TaskGroup | None = None
        self._rechecking: set[str] = set()  # tokens (hashes) whose check runs behind in this process

    def recheck_in(self, group: TaskGroup) -> None:
        """Run the checks of known tenants in `group` (the app's, for its life): they are served meanwhile. Without
        one, a check is waited for."""
        self._behind = group

    async def verdict(self, transport: ApiTransport, token: str, address: str | None, *,
                      vouched: bool = False) -> Verdict:
        """The verdict; `OverBudget` when the token is unknown and `address` (or its network, or everyone) has no
        checks left. A `vouched` token (a sign-in's, checked when it was made) spends no stranger's check. Names the
        request's tenant (`tenancy.py`): the token's user, when the verdict knows it."""
        credentials = Credentials(token)
        asked = False

        async def ask() -> tuple[Verdict, float]:
            nonlocal asked
            asked = True
            return await self._ask(transport, credentials, address, vouched)

        with tracing.span("gate token check") as span:
            verdict = await self._verdicts.get(credentials.token_key) or await self._earlier(
                credentials.token_key, ask) or await self._verdicts.remembered(
                credentials.token_key, ask, fetch_seconds=CHECK_SECONDS) \
                or UNDECIDED  # (None only from a fetch that answered nothing: `ask` always answers)
            tracing.note(span, {"agent_automation.token.asked": asked, "agent_automation.token.verdict":
                                verdict.standing if verdict.standing != CHECKED else
                                "accepted" if verdict.admitted else "refused"})
        if verdict.standing == RECALLED and transport.observer is not None:
            transport.observer.verdict_recalled()
        serve_user(verdict.user)
        return verdict

    async def _earlier(self, key: str, ask: Callable[[], Awaitable[tuple[Verdict, float]]]) -> Verdict | None:
        """A known tenant's earlier verdict, its verdict being due, with its check started behind; None when the token
        is not known (or nothing runs behind): then it is asked as it comes."""
        if self._behind is None:
            return None
        recalled = await self._recalled.get(key)
        if recalled is None:
            return None
        if key not in self._rechecking:
            self._rechecking.add(key)
            self._behind.start_soon(self._recheck, key, ask)
        return recalled._replace(standing=RECHECKING)

    async def _recheck(self, key: str, ask: Callable[[], Awaitable[tuple[Verdict, float]]]) -> None:
        try:
            await self._verdicts.remembered(key, ask, fetch_seconds=CHECK_SECONDS)
        except Exception:  # a check behind answers no request: its failure is logged, the next request asks again
            logger.exception("the check behind of token %s failed", tenant_id(key))
        finally:
            self._rechecking.discard(key)

    async def spend_unless_known(self, credentials: Credentials, address: str | None) -> None:
        """Before a token is checked with the service: one from the strangers' budget unless it was accepted in the
        last `KNOWN_SECONDS` (`OverBudget` when none is left). The consent page's check spends as `/mcp`'s does."""
        if await self._known.get(credentials.token_key) is None:
            with tracing.span("gate strangers budget"):  # raises OverBudget when spent: the span's error.type
                await self.budgets.spend(STRANGERS, address)

    async def remember_accepted(self, credentials: Credentials, address: str | None) -> None:
        """The service accepted the token (and, with an allowed list, it sees one of them): it is known for
        `KNOWN_SECONDS`, and vouches for `address`'s network in the budgets."""
        await self._known.put(credentials.token_key, True, KNOWN_SECONDS)
        await self.budgets.vouch(address)

    async def _ask(self, transport: ApiTransport, credentials: Credentials, address: str | None,
                   vouched: bool) -> tuple[Verdict, float]:
        key = credentials.token_key
        if not vouched:
            await self.spend_unless_known(credentials, address)
        client = AgentAutomationClient(transport, credentials).within(CHECK_SECONDS).single_attempt()
        try:
            user = await client.get_current_user()
            served = None
            if self.organizations.restricted:
                served = tuple(org.id for org in (await self.organizations.of_token(client)).served)
        except AuthenticationError:
            logger.info("the service refused token %s", tenant_id(key))
            _observe(transport, False)
            return Verdict(False), REFUSED_SECONDS
        except ApiError as exc:
            _observe(transport, None)
            return await self._unanswered(key, exc), UNDECIDED_RETRY_SECONDS
        verdict = Verdict(True, served, user.id)
        await self._recalled.put(key, verdict, RECALLED_SECONDS)
        _observe(transport, True)
        if verdict.admitted:
            await self.remember_accepted(credentials, address)
        else:
            await self._known.put(key, True, KNOWN_SECONDS)  # known to the service, though it vouches for no one
            logger.info("token %s sees none of the allowed organisations", tenant_id(key))
        return verdict, ACCEPTED_SECONDS

    async def _unanswered(self, key: str, exc: ApiError) -> Verdict:
        """What a token is served on while the service cannot say: its last verdict, if recent; else undecided."""
        recalled = await self._recalled.get(key)
        if recalled is None:
            logger.info("could not check token %s (%s); it is undecided for %d s", tenant_id(key), exc.kind,
                        UNDECIDED_RETRY_SECONDS)
            return UNDECIDED
        logger.warning("could not check token %s (%s); serving it on what the service said of it within the last "
                       "%d h, for %d s before asking again", tenant_id(key), exc.kind, RECALLED_SECONDS // 3600,
                       UNDECIDED_RETRY_SECONDS)
        return recalled._replace(standing=RECALLED)


def _observe(transport: ApiTransport, verdict: bool | None) -> None:
    if transport.observer is not None:
        transport.observer.token_checked(verdict)
