"""Which redirect URIs a client may register: `https`, or `http` to this machine's loopback (a native app's
local listener), never with a fragment or credentials; compared exactly."""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "::1", "localhost"})
MAX_URI_CHARS: Final = 2000


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


def is_loopback_url(url: str) -> bool:
    try:
        return (urlsplit(url).hostname or "") in LOOPBACK_HOSTS
    except ValueError:
        return False
