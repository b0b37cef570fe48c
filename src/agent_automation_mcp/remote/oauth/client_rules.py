"""What a client's metadata must satisfy, registered or fetched: redirect URIs `https`, or `http` to this
machine's loopback (a native app's local listener), never with a fragment or credentials, compared exactly;
a bounded name and scope. And where this deployment lets apps send a person back (`RedirectHosts`): anyone may
register an app named "Claude", so a company deployment returns sign-ins only to the chat apps it uses."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from mcp.server.auth.provider import RegistrationError
from mcp.shared.auth import OAuthClientInformationFull

from ...config import ANY_REDIRECT_HOST, CHAT_APP_REDIRECT_HOSTS
from .preflight import LOOPBACK_HOSTS

MAX_URI_CHARS: Final = 2000
MAX_REDIRECT_URIS: Final = 10
MAX_NAME_CHARS: Final = 200


def redirect_uri_problem(uri: str) -> str | None:
    """Why `uri` cannot be a redirect URI, or None when it can."""
    if len(uri) > MAX_URI_CHARS:
        return f"a redirect URI is at most {MAX_URI_CHARS} characters"
    try:
        parts = urlsplit(uri)
        host = parts.hostname or ""
    except ValueError:
        return "a redirect URI must be an absolute URL"
    if not host:
        return "a redirect URI must be an absolute URL with a host"
    if parts.fragment or "#" in uri:
        return "a redirect URI must not have a fragment"
    if parts.username is not None or parts.password is not None:
        return "a redirect URI must not carry credentials"
    if parts.scheme == "https" or (parts.scheme == "http" and host in LOOPBACK_HOSTS):
        return None
    return "a redirect URI must use https (or http to 127.0.0.1, [::1] or localhost)"


def check_metadata(client: OAuthClientInformationFull) -> None:
    """What a registration (or a metadata document) must satisfy beyond the SDK's model."""
    uris = [str(uri) for uri in client.redirect_uris or []]
    if not uris or len(uris) > MAX_REDIRECT_URIS:
        raise RegistrationError("invalid_redirect_uri", f"register 1 to {MAX_REDIRECT_URIS} redirect URIs")
    for uri in uris:
        problem = redirect_uri_problem(uri)
        if problem is not None:
            raise RegistrationError("invalid_redirect_uri", problem)
    if client.client_name is not None and len(client.client_name) > MAX_NAME_CHARS:
        raise RegistrationError("invalid_client_metadata", f"client_name is at most {MAX_NAME_CHARS} characters")
    if len(client.scope or "") > 1000:
        raise RegistrationError("invalid_client_metadata", "scope is too long")


@dataclass(frozen=True, slots=True)
class RedirectHosts:
    """The hosts apps may send a person back to (`AGENT_AUTOMATION_OAUTH_REDIRECT_HOSTS`); `*` among them: any host,
    each one not named warned about on the consent page."""

    named: frozenset[str] = frozenset(CHAT_APP_REDIRECT_HOSTS)

    @classmethod
    def of(cls, hosts: Iterable[str]) -> RedirectHosts:
        return cls(frozenset(hosts))

    @property
    def any(self) -> bool:
        return ANY_REDIRECT_HOST in self.named

    def names(self, uri: str) -> bool:
        """Whether the operator named the host of `uri` (or it is this machine's)."""
        host = (urlsplit(uri).hostname or "").lower()
        return host in self.named or host in LOOPBACK_HOSTS

    def problem(self, uris: Iterable[str]) -> str | None:
        """Why a client with these redirect URIs may not sign in here, or None."""
        if self.any:
            return None
        refused = sorted({urlsplit(uri).hostname or "" for uri in uris if not self.names(uri)})
        if not refused:
            return None
        return (f"this server sends people back only to {', '.join(sorted(self.named))} after signing in, not to "
                f"{', '.join(refused)} (its operator may add a host to AGENT_AUTOMATION_OAUTH_REDIRECT_HOSTS)")
