"""Toolset `oauth` (opt-in): the current user's OAuth tokens for third-party providers."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, Resolve
from mcp.types import CallToolResult

from ..api.errors import InvalidRequestError
from ..api.params import Provider
from .callers import client_for
from .confirm import Answer, Question, ask, require_confirmation
from .declarations import Toolset
from .results import Output, Timestamp, counted, label, ok, reported

toolset = Toolset("oauth", "See and revoke the user's OAuth connections to other services (account-wide).")


class OAuthConnection(Output):
    provider: str | None = None
    is_active: bool | None = None
    id: int | str | None = None
    scopes: list[str] | None = None
    created_at: Timestamp = None


class OAuthStatus(Output):
    tokens: list[OAuthConnection]


class OAuthRevocation(Output):
    provider: str  # as the service spells it
    active_before: int  # the user's active tokens for the provider before, as the status read first said
    revoked: int | None  # how many tokens the service says it revoked; null when it did not say
    response: dict[str, Any]


@toolset.tool("Get OAuth token status", "get_oauth_token_status")
async def get_oauth_token_status(ctx: Context) -> Annotated[CallToolResult, OAuthStatus]:
    """Show the current user's OAuth connections in the organisation: provider, whether the token is active
    (revoked ones are not), scopes."""
    tokens = [OAuthConnection.pick(token) for token in await (await client_for(ctx)).get_oauth_token_status()]
    states = ", ".join(f"{label(t.provider, '?')} {_state(t.is_active)}" for t in tokens)
    return ok(OAuthStatus(tokens=tokens), f"{counted(len(tokens), 'OAuth token')}{': ' + states if states else ''}")


def _state(is_active: bool | None) -> str:
    return "active" if is_active else "revoked" if is_active is False else "(state not given)"


def _revoke_question(provider: str, ctx: Context) -> Question:
    return ask(ctx, f"Revoke all of your {provider} OAuth tokens in this organisation: you will have to reconnect "
                    f"{provider} in the web app.")


@toolset.tool("Revoke OAuth tokens", "get_oauth_token_status", "revoke_oauth_tokens")
async def revoke_oauth_tokens(provider: Provider, ctx: Context,
                              confirmed: Annotated[Answer, Resolve(_revoke_question)]) -> Annotated[
        CallToolResult, OAuthRevocation]:
    """Revoke ALL of the current user's OAuth tokens for one provider (any case) in the organisation. The user
    must reconnect that provider in the web app afterwards. Only on the user's explicit request. Returns how
    many tokens the service revoked."""
    require_confirmation(confirmed, "revoke_oauth_tokens")
    client = await client_for(ctx)
    tokens = await client.get_oauth_token_status()
    known = sorted({token.provider for token in tokens if token.provider})
    spelled = next((name for name in known if name.casefold() == provider.casefold()), None)
    if spelled is None:  # sent as given, the service would match nothing and still answer 200
        raise InvalidRequestError(
            f"revoke_oauth_tokens: the user has no OAuth token for {provider!r} in this organisation; "
            f"known providers: {', '.join(known) or 'none'}", details={"providers": known},
            hint="Use one of the known providers (get_oauth_token_status lists them); nothing was revoked.",
            operation="revoke_oauth_tokens")
    active = sum(1 for token in tokens if token.provider == spelled and token.is_active is not False)
    response = await client.revoke_oauth_tokens(spelled)
    count = reported(response, ("revoked", "revoked_count", "count"), int)
    out = OAuthRevocation(provider=spelled, active_before=active, revoked=count, response=response)
    before = f"{active} active before"
    if count is None:
        return ok(out, f"The service accepted revoking the user's {provider} OAuth tokens ({before}) but did not say "
                       "how many it revoked")
    if count == 0:
        return ok(out, f"Revoked none: the service found no active {provider} OAuth token of the user's to revoke "
                       f"({before})")
    return ok(out, f"Revoked {count} of the user's {provider} OAuth token{'s' if count > 1 else ''} ({before})")
