"""Toolset `oauth` (opt-in): the current user's OAuth tokens for third-party providers."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, Resolve
from mcp.types import CallToolResult

from ..api.params import Provider
from .callers import client_for
from .confirm import Answer, Question, ask, require_confirmation
from .registry import Toolset
from .results import Output, label, ok

toolset = Toolset("oauth")


class OAuthConnection(Output):
    provider: str | None = None
    is_active: bool | None = None
    id: int | str | None = None
    scopes: list[str] | None = None
    created_at: str | None = None


class OAuthStatus(Output):
    tokens: list[OAuthConnection]


class OAuthRevocation(Output):
    provider: str
    response: dict[str, Any]


@toolset.tool("Get OAuth token status", "get_oauth_token_status")
async def get_oauth_token_status(ctx: Context) -> Annotated[CallToolResult, OAuthStatus]:
    """Show the current user's OAuth connections in the organisation: provider, whether the token is active
    (revoked ones are not), scopes."""
    tokens = [OAuthConnection.pick(token) for token in await (await client_for(ctx)).get_oauth_token_status()]
    states = ", ".join(f"{label(t.provider, '?')} {_state(t.is_active)}" for t in tokens)
    return ok(OAuthStatus(tokens=tokens), f"{len(tokens)} OAuth tokens{': ' + states if states else ''}")


def _state(is_active: bool | None) -> str:
    return "active" if is_active else "revoked" if is_active is False else "(state not given)"


def _revoke_question(provider: str, ctx: Context) -> Question:
    return ask(ctx, f"Revoke all of your {provider} OAuth tokens in this organisation: you will have to reconnect "
                    f"{provider} in the web app.")


@toolset.tool("Revoke OAuth tokens", "revoke_oauth_tokens")
async def revoke_oauth_tokens(provider: Provider, ctx: Context,
                              confirmed: Annotated[Answer, Resolve(_revoke_question)]) -> Annotated[
        CallToolResult, OAuthRevocation]:
    """Revoke ALL of the current user's OAuth tokens for one provider in the organisation. The user must
    reconnect that provider in the web app afterwards. Only on the user's explicit request."""
    require_confirmation(confirmed, "revoke_oauth_tokens")
    response = await (await client_for(ctx)).revoke_oauth_tokens(provider)
    return ok(OAuthRevocation(provider=provider, response=response),
              f"Revoked the user's {provider} OAuth tokens; the service's answer is in the result")
