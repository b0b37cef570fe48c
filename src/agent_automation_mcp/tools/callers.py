"""Who a tool call is made for, and the API client it gets.

`CallerResolver` turns a request into credentials: `ConfiguredCaller` (the token and organisation from
the environment: stdio, and HTTP with `--auth env`) or `RequestCaller` (each HTTP request's own caller, which the
gate resolved from its bearer token and `X-Organization-Id`, or its sign-in: `caller.py`). `client_for` is the one
place that turns those credentials, with the organisation resolved, into a client. No token is held at module
level: the resolver lives in the server's lifespan state, and per-token caches are bounded in size and age.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

import anyio
from mcp import MCPError
from mcp.server.mcpserver import Context

from .. import tracing
from ..api.client import AgentAutomationClient
from ..api.credentials import Credentials
from ..api.errors import ConfigurationError, RateLimitError
from ..api.transport import ApiTransport
from ..caching import SharedCache, SharedStore
from ..caller import caller_of
from ..config import ServerSettings
from .default_repository import DefaultRepository, RepositoryCache, not_in_organization

if TYPE_CHECKING:
    from ..run_status import RunStatus

CALL_SECONDS: Final = 45.0  # every call answers well before the 60 s most MCP clients wait
ORG_CACHE_SECONDS: Final = 300.0
ORG_CACHE_ENTRIES: Final = 10_000  # tokens whose organisations are remembered at once
TENANT_RETRY_SECONDS: Final = 1.0
# A call waiting for one of its token's slots gives up this long before its deadline: time left for the call itself.
SLOT_RESERVE_SECONDS: Final = 10.0
REPO_SETTING: Final = "AGENT_AUTOMATION_REPO_ID"
REPO_HEADER: Final = "X-Repo-Id"
NO_TOKEN_MESSAGE: Final = "no API token is configured"
NO_TOKEN_HINT: Final = (
    "Set AGENT_AUTOMATION_API_TOKEN (a Codegen API token from https://codegen.com/token) in this server's "
    "environment and restart it, or start it with --sandbox to try every tool against a local simulator.")

# Seconds the call being served waited for a slot (`TenantSlots`), set by the server: spent from the call's budget.
slot_waited: ContextVar[float] = ContextVar("slot_waited", default=0.0)


class CallerResolver(Protocol):
    @property
    def organization_hint(self) -> str:
        """How this kind of caller picks an organisation, for the error that lists them."""
        ...

    def credentials(self, ctx: Context[Any, Any]) -> Credentials:
        """The caller's token and, if known, organisation; `ConfigurationError` when there is none."""
        ...

    def default_repository(self, ctx: Context[Any, Any]) -> DefaultRepository | None:
        """The repository the caller's runs start on when a call names none (`default_repository.py`)."""
        ...


@dataclass(frozen=True, slots=True)
class ConfiguredCaller:
    """The single user of a local server: the token and organisation set in the environment or flags."""

    token: str | None = field(default=None, repr=False)
    org_id: int | None = None
    repo_id: int | None = None  # AGENT_AUTOMATION_REPO_ID
    organization_hint: str = "Set AGENT_AUTOMATION_ORG_ID (or --org-id) to one of them and restart."
    # Made once: every call of the server is this caller's (and a call asks twice).
    _credentials: Credentials | None = field(init=False, default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.token:
            with suppress(ValueError):  # malformed: `credentials` says so at each call
                object.__setattr__(self, "_credentials", Credentials(self.token, self.org_id))

    def credentials(self, ctx: Context[Any, Any]) -> Credentials:
        if self._credentials is not None:
            return self._credentials
        if not self.token:
            raise ConfigurationError(NO_TOKEN_MESSAGE, hint=NO_TOKEN_HINT)
        raise ConfigurationError("the configured API token is malformed: it must be printable ASCII without spaces",
                                 hint=NO_TOKEN_HINT)

    def default_repository(self, ctx: Context[Any, Any]) -> DefaultRepository | None:
        return DefaultRepository(self.repo_id, REPO_SETTING) if self.repo_id is not None else None


@dataclass(frozen=True, slots=True)
class RequestCaller:
    """Each HTTP request's own caller, as the gate resolved it: `Authorization: Bearer <token>` and, optionally,
    `X-Organization-Id`, or a sign-in's grant."""

    organization_hint: str = "Send the X-Organization-Id header with one of them."

    def credentials(self, ctx: Context[Any, Any]) -> Credentials:
        caller = caller_of(ctx.request_context.request)
        if caller is None:  # the HTTP gate answers 401 before this; reached only without it (e.g. stdio)
            raise ConfigurationError("this request carries no usable bearer token",
                                     hint="Send Authorization: Bearer <your Codegen API token> with each request.")
        return caller.credentials

    def default_repository(self, ctx: Context[Any, Any]) -> DefaultRepository | None:
        caller = caller_of(ctx.request_context.request)
        return DefaultRepository(caller.repo_id, REPO_HEADER) if caller and caller.repo_id is not None else None


Organizations = tuple[int, list[tuple[int, str | None]]]  # how many the token sees, and the first page (id, name)


def only_organization(total: int | None, ids: list[int]) -> int | None:
    """The organisation a token acts in when none is chosen: its only one, or None (it sees none, or several)."""
    return ids[0] if max(total or 0, len(ids)) == 1 else None


@dataclass(frozen=True, slots=True)
class OrganizationInUse:
    """The organisation a caller acts in, and the token's organisations it was chosen among."""

    id: int | None  # None: none chosen, and the token does not see exactly one
    listed: tuple[tuple[int, str | None], ...]  # the token's organisations, the first page (id, name)
    total: int  # how many the token sees

    @property
    def name(self) -> str | None:
        """The service's name for it (its text: show it only as data), when listed."""
        return next((name for org_id, name in self.listed if org_id == self.id), None)

    @property
    def member(self) -> bool | None:
        """Whether the token belongs to it; None when the first page does not tell."""
        if any(org_id == self.id for org_id, _ in self.listed):
            return True
        return False if self.total <= len(self.listed) else None


class OrganizationCache:
    """The token's organisations, remembered a few minutes per token: which one a caller acts in when none is given
    (its only one), and what the instructions name.

    A cache, not state: losing it costs one `list_organizations` request. Bounded in tokens and age, and
    shared by every replica through Redis when one is configured, so a token is looked up once per lifetime.
    The lookup is the tenant's own request, paced (and counted by the service) against its `standard` limit.
    """

    def __init__(self, store: SharedStore | None = None, ttl: float = ORG_CACHE_SECONDS,
                 max_entries: int = ORG_CACHE_ENTRIES) -> None:
        self._ttl = ttl
        self._orgs: SharedCache[Organizations] = SharedCache(
            store or SharedStore(), "orgs", max_entries,
            decode=lambda value: (value[0], [(org_id, name) for org_id, name in value[1]]))

    async def in_use(self, client: AgentAutomationClient, fetch_seconds: float = CALL_SECONDS) -> OrganizationInUse:
        """The organisation `client`'s caller acts in: the one its credentials name, else the token's only one.
        Waits at most `fetch_seconds` for another replica's lookup of the same token."""
        async def lookup() -> tuple[Organizations, float]:
            page = await client.list_organizations(limit=100)
            return (max(page.total or 0, len(page.items)), [(org.id, org.name) for org in page.items]), self._ttl

        cached = await self._orgs.remembered(client.credentials.token_key, lookup, fetch_seconds=fetch_seconds)
        assert cached is not None  # `lookup` answers or raises
        total, orgs = cached
        chosen = client.credentials.org_id
        if chosen is None:
            chosen = only_organization(total, [org_id for org_id, _ in orgs])
        return OrganizationInUse(chosen, tuple(orgs), total)

    async def resolve(self, client: AgentAutomationClient, hint: str) -> int:
        found = await self.in_use(client)
        if found.id is not None:
            return found.id
        if not found.total:
            raise ConfigurationError("this API token sees no organisation",
                                     hint="Check that the token belongs to an organisation at the service.")
        listed = ", ".join(str(org_id) for org_id, _ in found.listed)  # names are the service's text: in details only
        more = f" (the first {len(found.listed)} listed)" if found.total > len(found.listed) else ""
        raise ConfigurationError(f"this API token sees {found.total} organisations{more}: ids {listed}; names in "
                                 "details", details={"organizations": [{"id": i, "name": n} for i, n in found.listed]},
                                 hint=hint)


class TenantSlots:
    """A cap on each token's requests in flight on this server (tool calls and task methods alike, `tasks/result`
    holding one up to 35 s), so one tenant cannot take every worker from the others.

    A request over the cap waits its turn, first come first served, until its deadline; only one still waiting
    then is refused (`rate_limited`, nothing sent). Counts and queues live only while requests run: a token with
    nothing in flight holds no entry.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the per-tenant cap on calls in flight must be >= 1, got {limit}")
        self.limit = limit
        self._held: dict[str, int] = {}
        self._waiting: dict[str, deque[anyio.Event]] = {}  # token -> calls waiting, oldest first

    @asynccontextmanager
    async def hold(self, token_key: str, deadline: float) -> AsyncIterator[None]:
        """A slot for the call, waited for until `deadline` (a `time.monotonic()` instant)."""
        held = self._held.get(token_key, 0)
        if held < self.limit and token_key not in self._waiting:
            self._held[token_key] = held + 1
        else:  # only a call over the cap shows in its trace: where its time went
            with tracing.span("tenant slot wait", {"agent_automation.tenant_slots.limit": self.limit}):
                await self._wait_turn(token_key, deadline)
        try:
            yield
        finally:
            self._release(token_key)

    async def _wait_turn(self, token_key: str, deadline: float) -> None:
        turn = anyio.Event()  # set by `_release`, which hands this call a slot it frees
        queue = self._waiting.setdefault(token_key, deque())
        queue.append(turn)
        started = time.monotonic()
        try:
            with anyio.move_on_after(deadline - started):
                await turn.wait()
        except BaseException:  # cancelled: a slot handed over meanwhile goes on to the next in line
            if turn.is_set():
                self._release(token_key)
            raise
        finally:
            if not turn.is_set():  # gave up (deadline or cancelled): leave the line
                queue.remove(turn)
                if not queue:
                    del self._waiting[token_key]
        if not turn.is_set():
            raise RateLimitError(
                f"this API token's calls and task requests in flight on this server are at the per-tenant cap "
                f"({self.limit}); this one waited {time.monotonic() - started:.0f} s for one to finish and its "
                "deadline came first; nothing was sent", retry_after=TENANT_RETRY_SECONDS,
                hint="Wait for one of your calls or task requests in flight to finish, then send this again.")

    def _release(self, token_key: str) -> None:
        queue = self._waiting.get(token_key)
        if queue:  # the slot passes to the oldest waiting call; the count stays
            queue.popleft().set()
            if not queue:
                del self._waiting[token_key]
        elif self._held[token_key] == 1:
            del self._held[token_key]
        else:
            self._held[token_key] -= 1

    def __len__(self) -> int:
        return len(self._held)


@dataclass(slots=True)
class ServerState:
    """What the server's lifespan provides to every tool call."""

    transport: ApiTransport
    callers: CallerResolver
    settings: ServerSettings
    organizations: OrganizationCache = field(default_factory=OrganizationCache)
    repositories: RepositoryCache = field(default_factory=RepositoryCache)  # whether they have a default repository
    statuses: RunStatus | None = None  # the one reader of runs' statuses (run_status.py); the server always has one
    # The tools a request (its headers) is offered: the server's, narrowed by X-MCP-* (a result names only these).
    offered_to: Callable[[Any], frozenset[str]] = lambda headers: frozenset()


def state_of(ctx: Context[Any, Any]) -> ServerState:
    """The server's state, which its lifespan gives every request (tools annotate `ctx: Context`, the SDK's way)."""
    state: ServerState = ctx.request_context.lifespan_context
    return state


def offers(ctx: Context[Any, Any], tool: str) -> bool:
    """Whether this call's request is offered `tool` (the server's toolsets, narrowed by its headers): a result
    names only tools the model can call."""
    try:
        headers = ctx.headers
    except ValueError:  # called outside a request: the server's own tools
        headers = None
    try:
        return tool in state_of(ctx).offered_to(headers)
    except MCPError:  # unreadable X-MCP-* headers (refused before any tool runs over HTTP)
        return False


async def repository_for(ctx: Context[Any, Any], client: AgentAutomationClient, repo_id: int | None,
                         tool: str) -> tuple[int | None, DefaultRepository | None]:
    """The repository a call acts on: its own `repo_id`, else the caller's default once `client`'s organisation is
    found to have it (refused before anything is sent, if not); and the default, when it was used."""
    state = state_of(ctx)
    default = state.callers.default_repository(ctx)
    if repo_id is not None or default is None:
        return repo_id, None
    found, _ = await state.repositories.found(client, default.id)
    if not found:
        raise not_in_organization(tool, default, client.credentials.org_id)
    return default.id, default


async def client_for(ctx: Context[Any, Any], seconds: float = CALL_SECONDS) -> AgentAutomationClient:
    """A client for this call's caller, with a deadline `seconds` from now (less any wait for a slot).
    Without a configured organisation it finds one (`OrganizationCache`) at the first request whose operation
    needs one, as the table says."""
    state = state_of(ctx)
    organizations, hint = state.organizations, state.callers.organization_hint
    client = AgentAutomationClient(state.transport, state.callers.credentials(ctx),
                                   organization=lambda client: organizations.resolve(client, hint))
    return client.within(seconds - slot_waited.get())
