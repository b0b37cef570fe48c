"""The clients that may ask for a sign-in: registered here (RFC 7591) or described by their own URL (Client ID
Metadata Documents, fetched by `documents.py`).

A registration is not stored: its record is sealed into the client id this server answers with (`state_seal.py`,
bound to this deployment), so every replica knows the client whatever Redis holds, lost or cannot answer. A
registration costs nothing to keep, so none expires; it ends when the key that sealed it leaves
`AGENT_AUTOMATION_STATE_KEYS`. Holding an old id gives nothing a new registration would not: anyone may register
(the `register` budget bounds how often). The record is at most `MAX_CLIENT_BYTES`, so an id fits in the URL of
the consent page; a client secret, when a client asks for one, is sealed only as its hash. Clients registered
before ids were sealed are read from the store (`legacy.py`).

The SDK's registration handler answers with the record it gave `register_client`, so naming the client there is
what the client is told (`tests/e2e/test_oauth.py` registers, then signs in with the id it got).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Sequence
from contextlib import suppress
from typing import Final
from urllib.parse import unquote

from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.provider import RegistrationError
from mcp.shared.auth import OAuthClientInformationFull
from starlette.requests import Request

from ...state_seal import StateSeal, sealed_chars
from .client_rules import RedirectHosts, check_metadata
from .documents import MetadataDocuments, is_document_url
from .legacy import LegacyClients
from .store import Store, StoreUnavailable

CLIENT_PREFIX: Final = "aamcp_client_"
PURPOSE: Final = b"agent-automation-mcp oauth client id v1"
MAX_CLIENT_BYTES: Final = 4096  # a registration's record (10 redirect URIs of 300 characters fit, with room)
MAX_CLIENT_ID_CHARS: Final = len(CLIENT_PREFIX) + sealed_chars(MAX_CLIENT_BYTES)


def _secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class Clients:
    def __init__(self, keys: Sequence[str], resource: str, store: Store, documents: MetadataDocuments,
                 redirect_hosts: RedirectHosts | None = None) -> None:
        self._seal = StateSeal(keys, PURPOSE)
        self.resource = resource
        self.redirect_hosts = redirect_hosts or RedirectHosts()
        self.documents = documents
        self.legacy = LegacyClients(store)

    async def get(self, client_id: str) -> OAuthClientInformationFull | None:
        """A registered client, or the client a metadata document URL describes; None when there is none.
        A registered client's `client_secret` holds the secret's hash."""
        if is_document_url(client_id):
            return await self.documents.client(client_id)
        if not client_id.startswith(CLIENT_PREFIX):
            return await self.legacy.get(client_id)
        if len(client_id) > MAX_CLIENT_ID_CHARS:
            return None
        record = self._seal.open(client_id.removeprefix(CLIENT_PREFIX), self.resource)
        if record is None:
            return None
        return OAuthClientInformationFull.model_validate(json.loads(record) | {"client_id": client_id})

    def register(self, client: OAuthClientInformationFull) -> None:
        """Check a registration and name the client: its id is its record, sealed."""
        check_metadata(client)
        problem = self.redirect_hosts.problem(str(uri) for uri in client.redirect_uris or [])
        if problem is not None:
            raise RegistrationError("invalid_redirect_uri", problem)
        stored = client.model_copy(update={
            "client_secret": _secret_hash(client.client_secret) if client.client_secret else None})
        record = stored.model_dump_json(exclude_none=True, exclude={"client_id"}).encode()
        if len(record) > MAX_CLIENT_BYTES:
            raise RegistrationError("invalid_client_metadata", f"the registration is larger than {MAX_CLIENT_BYTES} "
                                    "bytes; register fewer or shorter URIs and names")
        client.client_id = CLIENT_PREFIX + self._seal.seal(record, self.resource)

    async def used(self, client_id: str) -> None:
        """A sign-in or refresh of the client: a registration of before sealed ids is kept in the store meanwhile
        (if the store answers: the tokens are issued already)."""
        if not is_document_url(client_id) and not client_id.startswith(CLIENT_PREFIX):
            with suppress(StoreUnavailable):
                await self.legacy.keep(client_id)


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
