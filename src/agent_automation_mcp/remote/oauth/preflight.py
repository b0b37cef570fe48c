"""What `--auth oauth` needs before the server starts: a public URL clients can reach, and beyond loopback the keys
that let sign-ins outlive the process. Apart from the sign-in itself, so that a mistake in them is named before the
SDK's auth and the sign-in's modules load (about 1.4 s)."""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from pydantic import AnyHttpUrl

from ...config import RemoteSettings
from .sealing import Sealer

LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "::1", "localhost"})


def is_loopback_url(url: str) -> bool:
    try:
        return (urlsplit(url).hostname or "") in LOOPBACK_HOSTS
    except ValueError:
        return False


def check_public_url(value: str | None) -> str:
    """The public URL as an origin without a trailing slash; `ValueError` says what is wrong."""
    if not value:
        raise ValueError("--auth oauth needs --public-url (AGENT_AUTOMATION_PUBLIC_URL): the address clients use, "
                         "e.g. https://mcp.example.com")
    parts = urlsplit(value.strip())
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.query or parts.fragment \
            or parts.path.strip("/") or parts.username or parts.password:
        raise ValueError(f"--public-url must be a scheme and host (and port), like https://mcp.example.com; got "
                         f"{value!r}")
    if parts.scheme == "http" and not is_loopback_url(value):
        raise ValueError("--public-url must be https beyond loopback (http only on 127.0.0.1, [::1], localhost)")
    return str(AnyHttpUrl(f"{parts.scheme}://{parts.netloc}")).rstrip("/")  # as the metadata will render it


def check_oauth_settings(remote: RemoteSettings) -> str:
    """The public URL, once the settings `--auth oauth` needs are there; `ValueError` names what is wrong."""
    public_url = check_public_url(remote.public_url)
    if remote.oauth_keys:
        Sealer(remote.oauth_keys)
    elif not is_loopback_url(public_url):
        raise ValueError("--auth oauth beyond loopback needs AGENT_AUTOMATION_OAUTH_KEYS (comma-separated; "
                         "make one with: python -c 'from cryptography.fernet import Fernet; "
                         "print(Fernet.generate_key().decode())')")
    if not remote.state_keys and not is_loopback_url(public_url):
        raise ValueError("--auth oauth beyond loopback needs AGENT_AUTOMATION_STATE_KEYS (comma-separated; make "
                         "one with: openssl rand -hex 32): sign-ins and registered apps are sealed with them, "
                         "and with a key of the process instead a restart would sign everyone out")
    return public_url
