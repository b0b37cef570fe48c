"""The clients that may ask for a sign-in: registered here (RFC 7591) or described by their own URL (Client ID
Metadata Documents, fetched by `documents.py`).

A registration that never leads to a sign-in expires within the hour, so a flood of registrations leaves
nothing behind; one that does is kept while it keeps signing in. Each is at most `MAX_CLIENT_BYTES` as stored,
and their number is bounded per address and in total (`register` budget, `signin.py`), so what strangers can make
Redis hold is bounded too (60 a minute by default: at most 3,600 pending, under 30 MB). A client secret, when a
client asks for one, is stored only as its hash.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Final
from urllib.parse import unquote

from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.provider import RegistrationError
from mcp.shared.auth import OAuthClientInformationFull
from starlette.requests import Request

from .client_rules import check_metadata
from .documents import MetadataDocuments, is_document_url
from .store import Store

PENDING_CLIENT_SECONDS: Final = 3600  # a registration must lead to a sign-in within this time
CLIENT_SECONDS: Final = 90 * 86400  # a client that signs in is kept this long after its last sign-in
MAX_CLIENT_BYTES: Final = 8192  # a registration as stored (10 redirect URIs of 500 characters fit, with room)


def _secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class Clients:
    def __init__(self, store: Store, documents: MetadataDocuments) -> None:
        self.store = store
        self.documents = documents

    async def get(self, client_id: str) -> OAuthClientInformationFull | None:
        """A registered client, or the client a metadata document URL describes; None when there is none.
        A registered client's `client_secret` holds the secret's hash."""
        if is_document_url(client_id):
            return await self.documents.client(client_id)
        if len(client_id) > 100:
            return None
        raw = await self.store.get(f"client:{client_id}")
        return OAuthClientInformationFull.model_validate_json(raw) if raw is not None else None

    async def register(self, client: OAuthClientInformationFull) -> None:
        check_metadata(client)
        stored = client.model_copy(update={
            "client_secret": _secret_hash(client.client_secret) if client.client_secret else None})
        raw = stored.model_dump_json(exclude_none=True)
        if len(raw.encode()) > MAX_CLIENT_BYTES:
            raise RegistrationError("invalid_client_metadata", f"the registration is larger than {MAX_CLIENT_BYTES} "
                                    "bytes; register fewer or shorter URIs and names")
        await self.store.put(f"client:{client.client_id}", raw, PENDING_CLIENT_SECONDS)

    async def signed_in(self, client_id: str) -> None:
        """A sign-in completed: keep the registration (a metadata document client is not stored)."""
        if is_document_url(client_id):
            return
        raw = await self.store.get(f"client:{client_id}")
        if raw is not None:
            await self.store.put(f"client:{client_id}", raw, CLIENT_SECONDS)


class SecretHashAuthenticator(ClientAuthenticator):
    """The SDK's token-endpoint client check, comparing against the stored hash of the secret instead of the secret.

    Public clients (`token_endpoint_auth_method: none`, as every metadata document client is) send no secret."""

    async def authenticate_request(self, request: Request) -> OAuthClientInformationFull:
        form = await request.form()
        client_id = form.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            raise AuthenticationError("Missing client_id")
        client = await self.provider.get_client(client_id)
        if client is None:
            raise AuthenticationError("Invalid client_id")
        if client.token_endpoint_auth_method in (None, "none") and not client.client_secret:
            return client
        secret = _presented_secret(request, form.get("client_secret"), client_id)
        if not client.client_secret or secret is None or not hmac.compare_digest(
                client.client_secret, _secret_hash(secret)):
            raise AuthenticationError("Invalid client_secret")
        return client


def _presented_secret(request: Request, posted: object, client_id: str) -> str | None:
    header = request.headers.get("authorization", "")
    if header.startswith("Basic "):
        try:
            user, _, secret = base64.b64decode(header[6:]).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return unquote(secret) if unquote(user) == client_id else None
    return posted if isinstance(posted, str) else None
