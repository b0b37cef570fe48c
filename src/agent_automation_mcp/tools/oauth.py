"""Toolset `oauth` (opt-in): the current user's OAuth tokens for third-party providers."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult

from ..api.params import Provider
from .callers import client_for
from .registry import Toolset
from .results import Output, ok

toolset = Toolset("oauth")


class OAuthStatus(Output):
    tokens: list[Any]


class OAuthRevocation(Output):
    provider: str
    response: dict[str, Any]


@toolset.tool("Get OAuth token status", "get_oauth_token_status")
async def get_oauth_token_status(ctx: Context) -> Annotated[CallToolResult, OAuthStatus]:
    """Show the current user's OAuth connections in the organisation (provider, active or not)."""
    data = await (await client_for(ctx)).get_oauth_token_status()
    tokens = data if isinstance(data, list) else [data]
    return ok(OAuthStatus(tokens=tokens), f"{len(tokens)} OAuth token records")


@toolset.tool("Revoke OAuth tokens", "revoke_oauth_tokens")
async def revoke_oauth_tokens(provider: Provider, ctx: Context) -> Annotated[CallToolResult, OAuthRevocation]:
    """Revoke ALL of the current user's OAuth tokens for one provider in the organisation. The user must
    reconnect that provider in the web app afterwards. Only on the user's explicit request."""
    response = await (await client_for(ctx)).revoke_oauth_tokens(provider)
    return ok(OAuthRevocation(provider=provider, response=response), f"Revoked every {provider} OAuth token")
