"""Who a tool call is made for, and the API client it gets.

`CallerResolver` turns a request into credentials. Today that is `ConfiguredCaller` (the token and
organisation from the environment); the remote mode will add a resolver that reads each HTTP
request's headers (`ctx.headers`) and pass it to `build_server` — nothing else changes. No token is
held at module level: the resolver lives in the server's lifespan state.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from mcp.server.mcpserver import Context

from ..api.client import AgentAutomationClient
from ..api.credentials import Credentials
from ..api.errors import ConfigurationError
from ..api.transport import ApiTransport
from ..config import ServerSettings

CALL_SECONDS: Final = 45.0  # every call answers well before the 60 s most MCP clients wait
ORG_CACHE_SECONDS: Final = 300.0
NO_TOKEN_MESSAGE: Final = "no API token is configured"
NO_TOKEN_HINT: Final = (
    "Set AGENT_AUTOMATION_API_TOKEN (a Codegen API token from https://codegen.com/token) in this server's "
    "environment and restart it, or start it with --sandbox to try every tool against a local simulator.")


class CallerResolver(Protocol):
    def credentials(self, ctx: Context[Any, Any]) -> Credentials:
        """The caller's token and, if known, organisation; `ConfigurationError` when there is none."""
        ...


@dataclass(frozen=True, slots=True)
class ConfiguredCaller:
    """The single user of a local server: the token and organisation set in the environment or flags."""

    token: str | None = field(default=None, repr=False)
    org_id: int | None = None

    def credentials(self, ctx: Context[Any, Any]) -> Credentials:
        if not self.token:
            raise ConfigurationError(NO_TOKEN_MESSAGE, hint=NO_TOKEN_HINT)
        try:
            return Credentials(self.token, self.org_id)
        except ValueError:
            raise ConfigurationError("the configured API token is malformed: it must be printable ASCII without spaces",
                                     hint=NO_TOKEN_HINT) from None


class OrganizationCache:
    """When no organisation is configured: the token's only organisation, remembered a few minutes per token.

    A cache, not state: losing it costs one `list_organizations` request.
    """

    def __init__(self, ttl: float = ORG_CACHE_SECONDS) -> None:
        self._ttl = ttl
        self._orgs: dict[str, tuple[float, int, list[tuple[int, str | None]]]] = {}

    async def resolve(self, client: AgentAutomationClient) -> int:
        key = client.credentials.token_key
        cached = self._orgs.get(key)
        if cached is None or cached[0] < time.monotonic():
            page = await client.list_organizations(limit=100)
            total = max(page.total or 0, len(page.items))
            cached = (time.monotonic() + self._ttl, total, [(org.id, org.name) for org in page.items])
            self._orgs[key] = cached
        _, total, orgs = cached
        if not orgs:
            raise ConfigurationError("this API token sees no organisation",
                                     hint="Check the token, or set AGENT_AUTOMATION_ORG_ID.")
        if total == 1:
            return orgs[0][0]
        listed = ", ".join(str(org_id) for org_id, _ in orgs)  # names are the service's text: in details only
        more = f" (the first {len(orgs)} listed)" if total > len(orgs) else ""
        raise ConfigurationError(f"this API token sees {total} organisations{more}: ids {listed}; names in details",
                                 details={"organizations": [{"id": i, "name": n} for i, n in orgs]},
                                 hint="Set AGENT_AUTOMATION_ORG_ID (or --org-id) to one of them and restart.")


@dataclass(slots=True)
class ServerState:
    """What the server's lifespan provides to every tool call."""

    transport: ApiTransport
    callers: CallerResolver
    settings: ServerSettings
    organizations: OrganizationCache = field(default_factory=OrganizationCache)


def state_of(ctx: Context[Any, Any]) -> ServerState:
    return ctx.request_context.lifespan_context


async def client_for(ctx: Context[Any, Any], seconds: float = CALL_SECONDS, *,
                     needs_org: bool = True) -> AgentAutomationClient:
    """A client for this call's caller, with a deadline `seconds` from now and the organisation resolved."""
    state = state_of(ctx)
    client = AgentAutomationClient(state.transport, state.callers.credentials(ctx)).within(seconds)
    if needs_org and client.credentials.org_id is None:
        client = client.for_org(await state.organizations.resolve(client))
    return client
