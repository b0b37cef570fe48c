"""DNS-rebinding protection: which Host and Origin headers `/mcp` accepts.

A web page can make a browser send requests to any address, under a name the page's author controls;
checking that Host names this server (and that a browser's Origin is one we trust) stops such a page
from driving the server. An allowed name is either `name` (any port) or `name:port`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import lru_cache
from typing import Final
from urllib.parse import urlsplit

from ..api.settings import is_loopback
from .refusals import Refused, refusal

LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "[::1]")
WILDCARDS: Final = ("0.0.0.0", "[::]")


def bracketed(host: str) -> str:
    """A host as it appears in a Host header or URL: IPv6 literals in brackets, names lowercased."""
    host = host.strip().lower().rstrip(".")
    if host.startswith("["):
        return host
    try:
        return f"[{host}]" if ipaddress.ip_address(host).version == 6 else host
    except ValueError:
        return host


def is_wildcard(host: str) -> bool:
    return bracketed(host) in WILDCARDS


@lru_cache(maxsize=256)  # every request's Host: a handful of names, parsed once each (bounded whatever is sent)
def split_authority(value: str) -> tuple[str, int | None] | None:
    """`name:port` → (name, port); IPv6 in brackets; None when it cannot be read."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[:end + 1], value[end + 1:]
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:]
    elif value.count(":") > 1:  # a bare IPv6 literal, as an operator may write it
        name, port = bracketed(value), ""
    else:
        name, _, port = value.partition(":")
    if not name or (port and not port.isdigit()):
        return None
    return bracketed(name), int(port) if port else None


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """`hosts`: (name, port or None for any); None means any Host (a wildcard bind with no allowed hosts).
    `origins`: (scheme, name, port or None)."""

    hosts: frozenset[tuple[str, int | None]] | None
    origins: frozenset[tuple[str, str, int | None]]

    @classmethod
    def build(cls, bind: str, allowed_hosts: tuple[str, ...], allowed_origins: tuple[str, ...]) -> HostPolicy:
        """`ValueError` names an entry that cannot be read."""
        hosts: set[tuple[str, int | None]] = set()
        for entry in allowed_hosts:
            parsed = split_authority(entry)
            if parsed is None:
                raise ValueError(f"an allowed host is a name or name:port, got {entry!r}")
            hosts.add(parsed)
        origins = {_origin(entry) for entry in allowed_origins}
        if is_loopback(bind):
            hosts |= {(name, None) for name in (*LOOPBACK_NAMES, bracketed(bind))}
            origins |= {(scheme, name, None) for scheme in ("http", "https")
                        for name in (*LOOPBACK_NAMES, bracketed(bind))}
        elif not is_wildcard(bind):
            hosts.add((bracketed(bind), None))
        return cls(frozenset(hosts) if hosts else None, frozenset(origins))

    def refusal(self, host: str | None, origin: str | None) -> Refused | None:
        if self.hosts is not None and not _host_allowed(self.hosts, host):
            shown = (host or "")[:100]
            return refusal(421, f"this server does not answer to the Host {shown!r}",
                           "If that is this server's name, start it with --allowed-host NAME (or "
                           "AGENT_AUTOMATION_ALLOWED_HOSTS); behind a proxy, pass the client's Host through or allow "
                           "the name the proxy sends.")
        if origin and not self._origin_allowed(origin):
            return refusal(403, f"requests from the web origin {origin[:100]!r} are not allowed",
                           "If pages from that origin may use this server, start it with --allowed-origin ORIGIN "
                           "(or AGENT_AUTOMATION_ALLOWED_ORIGINS).")
        return None

    def _origin_allowed(self, origin: str) -> bool:
        try:
            scheme, name, port = _origin(origin)
        except ValueError:
            return False
        return (scheme, name, None) in self.origins or (scheme, name, port) in self.origins


def _host_allowed(hosts: frozenset[tuple[str, int | None]], host: str | None) -> bool:
    parsed = split_authority(host) if host else None
    return parsed is not None and ((parsed[0], None) in hosts or parsed in hosts)


def _origin(value: str) -> tuple[str, str, int | None]:
    parts = urlsplit(value.strip().lower())
    try:
        port = parts.port
    except ValueError:
        port = None
        parts = parts._replace(scheme="")
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") or parts.query:
        raise ValueError(f"an allowed origin is scheme://name or scheme://name:port, got {value!r}")
    return parts.scheme, bracketed(parts.hostname), port
