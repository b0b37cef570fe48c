"""Helpers for the sign-in tests: a person at the consent page (plain HTTP, as a browser without JavaScript
posts the form), the SDK's OAuth client wired to it, and the raw OAuth requests a hostile client would send."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from html import unescape
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT_URI = "http://127.0.0.1:9/callback"  # never listened on: the tests read the redirect's Location
TIMEOUT = httpx2.Timeout(30, read=120)


def hidden_fields(page: str) -> dict[str, str]:
    return {name: unescape(value) for name, value in
            re.findall(r'<input type="hidden" name="([a-z]+)" value="([^"]*)">', page)}


def organisation_options(page: str) -> list[str]:
    return re.findall(r'<option value="(\d+)">', page)


def query_of(location: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(urlsplit(location).query).items()}


@dataclass
class Person:
    """Someone at the consent page: pastes `token`, picks `organization` if asked, approves (or denies)."""

    token: str
    organization: str | None = None
    approve: bool = True
    location: str | None = None
    pages: list[str] = field(default_factory=list)

    async def open(self, authorization_url: str) -> None:
        """The SDK's redirect handler: the browser opens the page, the person answers, the server redirects."""
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(authorization_url))
        async with httpx2.AsyncClient(timeout=TIMEOUT) as browser:
            page = await browser.get(authorization_url)
            assert page.status_code == 200, page.text
            self.pages.append(page.text)
            answer = await browser.post(f"{origin}/authorize", data={
                **hidden_fields(page.text), "token": self.token, "action": "approve" if self.approve else "deny"})
            if answer.status_code == 200 and organisation_options(answer.text):  # the organisation step
                self.pages.append(answer.text)
                answer = await browser.post(f"{origin}/authorize", data={
                    **hidden_fields(answer.text), "organization": self.organization or "", "action": "approve"})
            assert answer.status_code == 303, answer.text
            self.location = answer.headers["location"]

    async def callback(self) -> AuthorizationCodeResult:
        assert self.location is not None
        query = query_of(self.location)
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))


class MemoryTokens:
    """The SDK client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def oauth_client(url: str, person: Person, storage: MemoryTokens, *, client_metadata_url: str | None = None,
                 mode: str = "auto") -> tuple[Client, OAuthClientProvider]:
    """The SDK's `Client` signing in with the SDK's `OAuthClientProvider` (DCR, or CIMD with `client_metadata_url`)."""
    provider = OAuthClientProvider(
        url, OAuthClientMetadata(redirect_uris=[REDIRECT_URI], client_name="Test Client",
                                                      token_endpoint_auth_method="none"),
        storage, redirect_handler=person.open, callback_handler=person.callback,
        client_metadata_url=client_metadata_url)
    http = httpx2.AsyncClient(auth=provider, timeout=TIMEOUT)
    return Client(streamable_http_client(url, http_client=http), mode=mode), provider


def once_redis_is_asked_again(send: Callable[[], httpx2.Response]) -> httpx2.Response:
    """`send()`'s answer once it is not 503: a replica asks Redis again a moment (2 s) after Redis failed it, and
    until then what needs Redis (a consent page, a revocation) answers 503 with Retry-After."""
    for _ in range(20):
        answer = send()
        if answer.status_code != 503:
            break
        time.sleep(0.5)
    return answer


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


@dataclass
class RawFlow:
    """The OAuth requests one at a time, over plain HTTP, for the tests that send what a hostile client would."""

    origin: str
    http: httpx2.Client = field(default_factory=lambda: httpx2.Client(timeout=30))

    def register(self, **metadata: Any) -> str:
        body = {"redirect_uris": [REDIRECT_URI], "client_name": "Raw", "token_endpoint_auth_method": "none"} | metadata
        answer = self.http.post(f"{self.origin}/register", json=body)
        assert answer.status_code == 201, answer.text
        return answer.json()["client_id"]

    def consent_page(self, client_id: str, challenge: str, **params: str) -> httpx2.Response:
        query = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT_URI, "state": "st-1",
                 "code_challenge": challenge, "code_challenge_method": "S256"} | params
        return self.http.get(f"{self.origin}/authorize?{urlencode(query)}")

    def approve(self, page: httpx2.Response, token: str, **extra: str) -> httpx2.Response:
        return self.http.post(f"{self.origin}/authorize",
                              data={**hidden_fields(page.text), "token": token, "action": "approve"} | extra)

    def code(self, client_id: str, token: str) -> tuple[str, str]:
        """A fresh code and its PKCE verifier."""
        verifier, challenge = pkce()
        answer = self.approve(self.consent_page(client_id, challenge), token)
        assert answer.status_code == 303, answer.text
        return query_of(answer.headers["location"])["code"], verifier

    def exchange(self, client_id: str, code: str, verifier: str, **extra: str) -> httpx2.Response:
        return self.http.post(f"{self.origin}/token", data={
            "grant_type": "authorization_code", "code": code, "code_verifier": verifier, "client_id": client_id,
            "redirect_uri": REDIRECT_URI} | extra)

    def refresh(self, client_id: str, refresh_token: str) -> httpx2.Response:
        return self.http.post(f"{self.origin}/token", data={
            "grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id})

    def tokens(self, client_id: str, token: str) -> dict[str, Any]:
        answer = self.exchange(client_id, *self.code(client_id, token))
        assert answer.status_code == 200, answer.text
        return answer.json()

    def revoke(self, token: str, client_id: str) -> httpx2.Response:
        return self.http.post(f"{self.origin}/revoke", data={"token": token, "client_id": client_id})

    def mcp_status(self, access_token: str, origin: str | None = None, **headers: str) -> httpx2.Response:
        """A modern-era tools/list with the token (and `headers`, `x_organization_id` for X-Organization-Id)."""
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
        return self.http.post(f"{origin or self.origin}/mcp", json=call, headers={
            "authorization": f"Bearer {access_token}", "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list",
            **{name.replace("_", "-"): value for name, value in headers.items()}})
