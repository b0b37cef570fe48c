"""Who a tool call is made for, and the API client it gets.

`CallerResolver` turns a request into credentials: `ConfiguredCaller` (the token and organisation from
the environment: stdio, and HTTP with `--auth env`) or `RequestCaller` (each HTTP request's bearer token
and `X-Organization-Id`: `--auth request`). `client_for` is the one place that turns those credentials,
with the organisation resolved, into a client. No token is held at module level: the resolver lives in
the server's lifespan state, and per-token caches are bounded in size and age.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from mcp.server.mcpserver import Context

from ..api.client import AgentAutomationClient
from ..api.credentials import Credentials
from ..api.errors import ConfigurationError, RateLimitError
from ..api.transport import ApiTransport
from ..caching import ExpiringCache
from ..config import ServerSettings
from ..headers import HeaderError, bearer_token, organization_id

CALL_SECONDS: Final = 45.0  # every call answers well before the 60 s most MCP clients wait
ORG_CACHE_SECONDS: Final = 300.0
ORG_CACHE_ENTRIES: Final = 10_000  # tokens whose organisations are remembered at once
TENANT_RETRY_SECONDS: Final = 1.0
NO_TOKEN_MESSAGE: Final = "no API token is configured"
NO_TOKEN_HINT: Final = (
    "Set AGENT_AUTOMATION_API_TOKEN (a Codegen API token from https://codegen.com/token) in this server's "
    "environment and restart it, or start it with --sandbox to try every tool against a local simulator.")


class CallerResolver(Protocol):
    organization_hint: str  # how this kind of caller picks an organisation, for the error that lists them

    def credentials(self, ctx: Context[Any, Any]) -> Credentials:
        """The caller's token and, if known, organisation; `ConfigurationError` when there is none."""
        ...


@dataclass(frozen=True, slots=True)
class ConfiguredCaller:
    """The single user of a local server: the token and organisation set in the environment or flags."""

    token: str | None = field(default=None, repr=False)
    org_id: int | None = None
    organization_hint: str = "Set AGENT_AUTOMATION_ORG_ID (or --org-id) to one of them and restart."

    def credentials(self, ctx: Context[Any, Any]) -> Credentials:
        if not self.token:
            raise ConfigurationError(NO_TOKEN_MESSAGE, hint=NO_TOKEN_HINT)
        try:
            return Credentials(self.token, self.org_id)
        except ValueError:
            raise ConfigurationError("the configured API token is malformed: it must be printable ASCII without spaces",
                                     hint=NO_TOKEN_HINT) from None


@dataclass(frozen=True, slots=True)
class RequestCaller:
    """Each HTTP request's own caller: `Authorization: Bearer <token>` and, optionally, `X-Organization-Id`."""

    organization_hint: str = "Send the X-Organization-Id header with one of them."

    def credentials(self, ctx: Context[Any, Any]) -> Credentials:
        headers = ctx.headers
        token = bearer_token(headers)
        if token is None:  # the HTTP gate answers 401 before this; reached only without it (e.g. stdio)
            raise ConfigurationError("this request carries no usable bearer token",
                                     hint="Send Authorization: Bearer <your Codegen API token> with each request.")
        try:
            return Credentials(token, organization_id(headers))
        except HeaderError as exc:
            raise ConfigurationError(str(exc), hint=self.organization_hint) from None


class OrganizationCache:
    """When no organisation is given: the token's only organisation, remembered a few minutes per token.

    A cache, not state: losing it costs one `list_organizations` request. Bounded in tokens and age.
    """

    def __init__(self, ttl: float = ORG_CACHE_SECONDS, max_entries: int = ORG_CACHE_ENTRIES) -> None:
        self._ttl = ttl
        self._orgs: ExpiringCache[tuple[int, list[tuple[int, str | None]]]] = ExpiringCache(max_entries)

    async def resolve(self, client: AgentAutomationClient, hint: str) -> int:
        key = client.credentials.token_key
        cached = self._orgs.get(key)
        if cached is None:
            page = await client.list_organizations(limit=100)
            cached = (max(page.total or 0, len(page.items)), [(org.id, org.name) for org in page.items])
            self._orgs.put(key, cached, self._ttl)
        total, orgs = cached
        if not orgs:
            raise ConfigurationError("this API token sees no organisation",
                                     hint="Check that the token belongs to an organisation at the service.")
        if total == 1:
            return orgs[0][0]
        listed = ", ".join(str(org_id) for org_id, _ in orgs)  # names are the service's text: in details only
        more = f" (the first {len(orgs)} listed)" if total > len(orgs) else ""
        raise ConfigurationError(f"this API token sees {total} organisations{more}: ids {listed}; names in details",
                                 details={"organizations": [{"id": i, "name": n} for i, n in orgs]},
                                 hint=hint)


class TenantSlots:
    """A cap on each token's calls in flight, so one tenant cannot take every worker from the others.

    Counts live only while calls run: a token with nothing in flight holds no entry.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the per-tenant cap on calls in flight must be >= 1, got {limit}")
        self.limit = limit
        self._held: dict[str, int] = {}

    @contextmanager
    def hold(self, token_key: str) -> Iterator[None]:
        held = self._held.get(token_key, 0)
        if held >= self.limit:
            raise RateLimitError(
                f"this API token already has {held} calls in flight on this server (the per-tenant cap); "
                "nothing was sent", retry_after=TENANT_RETRY_SECONDS,
                hint="Wait for one of your calls in flight to finish, then call again.")
        self._held[token_key] = held + 1
        try:
            yield
        finally:
            if self._held[token_key] == 1:
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


def state_of(ctx: Context[Any, Any]) -> ServerState:
    return ctx.request_context.lifespan_context


async def client_for(ctx: Context[Any, Any], seconds: float = CALL_SECONDS) -> AgentAutomationClient:
    """A client for this call's caller, with a deadline `seconds` from now. Without a configured organisation
    it finds one (`OrganizationCache`) at the first request whose operation needs one, as the table says."""
    state = state_of(ctx)
    organizations, hint = state.organizations, state.callers.organization_hint
    return AgentAutomationClient(state.transport, state.callers.credentials(ctx),
                                 organization=lambda client: organizations.resolve(client, hint)).within(seconds)
