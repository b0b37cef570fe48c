"""Client ID Metadata Documents: a client whose `client_id` is an `https` URL is described by the JSON found there.

Fetching a URL a stranger chose is a way into the operator's network, so the fetch is bounded: `https` only,
every address the name resolves to must be public (no loopback, private, link-local or reserved address),
and the connection goes to the address that was checked (TLS still verifies the name), so a name that
resolves differently a moment later cannot lead elsewhere; at most `MAX_REDIRECTS` redirects (each checked
the same way), `FETCH_SECONDS` in all and `MAX_DOCUMENT_BYTES` of body. A document is remembered for
`DOCUMENT_SECONDS`, so a sign-in fetches it once (each time, while Redis does not answer).

Tests serve a document from a loopback `https` server; they name that exact `host:port` in
`AGENT_AUTOMATION_OAUTH_TRUSTED_CLIENT_HOSTS`, which lifts the address check for it alone.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable
from contextlib import suppress
from typing import Final
from urllib.parse import urljoin, urlsplit

import anyio
import httpx2
from mcp.server.auth.provider import RegistrationError
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import ValidationError

from .client_rules import check_metadata
from .store import Store, StoreUnavailable

logger = logging.getLogger(__name__)

MAX_DOCUMENT_BYTES: Final = 16 * 1024
FETCH_SECONDS: Final = 5.0
MAX_REDIRECTS: Final = 2
DOCUMENT_SECONDS: Final = 600
MAX_URL_CHARS: Final = 2000


def is_document_url(client_id: str) -> bool:
    return client_id.startswith("https://")


class DocumentRefused(Exception):
    """Why a client_id URL gives no client; the message is shown on the error page."""


class MetadataDocuments:
    def __init__(self, store: Store, trusted_hosts: Iterable[str] = ()) -> None:
        self.store = store
        self.trusted_hosts = frozenset(trusted_hosts)

    async def client(self, url: str) -> OAuthClientInformationFull | None:
        """The client the document at `url` describes; None (the reason logged) when it cannot be had."""
        if len(url) > MAX_URL_CHARS:
            return None
        with suppress(StoreUnavailable):  # a cache: without it, the document is fetched again
            cached = await self.store.get(f"cimd:{url}")
            if cached is not None:
                return OAuthClientInformationFull.model_validate_json(cached)
        try:
            client = await self._fetch(url)
        except DocumentRefused as exc:
            logger.info("client metadata document refused: %s", exc)
            return None
        with suppress(StoreUnavailable):
            await self.store.put(f"cimd:{url}", client.model_dump_json(exclude_none=True), DOCUMENT_SECONDS)
        return client

    async def _fetch(self, url: str) -> OAuthClientInformationFull:
        with anyio.fail_after(FETCH_SECONDS):
            body = await self._body(url)
        try:
            client = OAuthClientInformationFull.model_validate_json(body)
            check_metadata(client)
        except ValidationError as exc:
            raise DocumentRefused(f"not a client metadata document ({exc.error_count()} problems)") from None
        except RegistrationError as exc:
            raise DocumentRefused(exc.error_description or exc.error) from None
        if client.client_id != url:
            raise DocumentRefused("the document's client_id is not its own URL")
        if client.client_secret or client.token_endpoint_auth_method not in (None, "none"):
            raise DocumentRefused("a metadata document client authenticates with none (a public client)")
        return client.model_copy(update={"token_endpoint_auth_method": "none"})

    async def _body(self, url: str) -> bytes:
        async with httpx2.AsyncClient(follow_redirects=False, timeout=FETCH_SECONDS) as http:
            for _ in range(MAX_REDIRECTS + 1):
                parts = urlsplit(url)
                address = await self._checked_address(url)
                pinned = parts._replace(netloc=f"[{address}]:{parts.port or 443}" if ":" in address
                                        else f"{address}:{parts.port or 443}").geturl()
                request = http.build_request("GET", pinned, headers={"accept": "application/json",
                                                                    "host": parts.netloc},
                                             extensions={"sni_hostname": parts.hostname})
                answer = await http.send(request, stream=True)
                try:
                    if answer.is_redirect and "location" in answer.headers:
                        url = urljoin(url, answer.headers["location"])
                        continue
                    return await _bounded_body(answer)
                finally:
                    await answer.aclose()
        raise DocumentRefused(f"more than {MAX_REDIRECTS} redirects")

    async def _checked_address(self, url: str) -> str:
        """The address to connect to for `url`, once every address its host resolves to is found public."""
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname or parts.username or parts.password:
            raise DocumentRefused("a client_id URL must be https, with a host and no credentials")
        port = parts.port or 443
        try:
            infos = await anyio.getaddrinfo(parts.hostname, port, proto=6)
        except OSError:
            raise DocumentRefused("the client_id URL's host does not resolve") from None
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
        if not addresses:
            raise DocumentRefused("the client_id URL's host does not resolve")
        if f"{parts.hostname}:{port}" not in self.trusted_hosts and not all(a.is_global for a in addresses):
            raise DocumentRefused("the client_id URL's host resolves to a private address")
        return str(addresses[0])


async def _bounded_body(answer: httpx2.Response) -> bytes:
    if answer.status_code != 200:
        raise DocumentRefused(f"the client_id URL answered {answer.status_code}")
    body = b""
    async for chunk in answer.aiter_bytes():
        body += chunk
        if len(body) > MAX_DOCUMENT_BYTES:
            raise DocumentRefused(f"the document is larger than {MAX_DOCUMENT_BYTES} bytes")
    return body
