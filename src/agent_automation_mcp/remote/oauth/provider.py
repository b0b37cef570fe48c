"""The SDK's authorization-server provider over our clients and grants, so that the SDK's own handlers serve
`/register` (RFC 7591) and `/token` (code with PKCE, refresh): its checks of client, expiry, redirect URI and
code verifier are the ones the SDK's tests keep right. `/authorize` and `/revoke` are ours (`endpoints.py`)."""

from __future__ import annotations

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from .clients import Clients
from .grants import GrantRefresh, Grants, PendingCode


class SignInProvider:
    def __init__(self, clients: Clients, grants: Grants) -> None:
        self.clients = clients
        self.grants = grants

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return await self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients.register(client_info)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> PendingCode | None:
        return await self.grants.pending_code(code)

    async def exchange_authorization_code(self, client: OAuthClientInformationFull, code: PendingCode) -> OAuthToken:
        tokens = await self.grants.redeem(code)
        await self.clients.used(client.client_id)
        return tokens

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> GrantRefresh | None:
        return await self.grants.refresh_token(client.client_id, refresh_token)

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: GrantRefresh,
                                     scopes: list[str]) -> OAuthToken:
        tokens = await self.grants.rotate(refresh_token)
        await self.clients.used(client.client_id)
        return tokens
