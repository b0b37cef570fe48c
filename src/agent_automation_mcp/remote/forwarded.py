"""The client's address, for the per-address budgets: the socket's peer, or what a trusted proxy says it saw.

`X-Forwarded-For` is a list anyone can start: a client may send one, and a proxy appends the address it saw (or,
as the shipped HAProxy and ingress-nginx do, replaces the list with it). So only what trusted proxies wrote is
believed: read from the right, each entry a trusted proxy wrote is the address of whoever connected to it, and the
first entry that is not itself a trusted proxy is the client. Entries further left are the client's own claims
and never count.

A proxy that is trusted but passes the header on untouched would let every client pick its address. It shows
itself: a request the client sent without the header arrives without one (a proxy that sets or appends always
sends one; the probes of `PROBES`, which balancers and the kubelet send as themselves, do not count). Such a
request counts as the proxy's own (its budgets), and an error naming the fix is logged, at most once a minute;
the requests that do carry the header are read as ever. Nothing is latched: one request without the header (a
probe on the wrong path, a colleague's curl from inside the trusted network) must not make a replica take every
client for the proxy, one budget for all, until it restarts.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Iterable
from typing import Final

from starlette.types import ASGIApp, Receive, Scope, Send

from .middleware import HttpMiddleware

logger = logging.getLogger(__name__)

FORWARDED_FOR: Final = b"x-forwarded-for"
MAX_ENTRIES: Final = 32  # a longer list is read from its right end only
PROBES: Final = frozenset({"/healthz", "/readyz", "/metrics"})  # asked by a balancer or the kubelet as itself
LOG_EVERY_SECONDS: Final = 60.0  # a proxy that does not set the header is said this often at most

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_proxies(entries: Iterable[str]) -> tuple[Network, ...]:
    """Addresses or networks (`10.0.0.0/8`); `ValueError` names an entry that is neither."""
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip().strip("[]"), strict=False))
        except ValueError:
            raise ValueError(f"a trusted proxy is an IP address or network such as 10.0.0.0/8, got {entry!r}") from None
    return tuple(networks)


def _address(entry: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An entry of the list as an address (`1.2.3.4`, `1.2.3.4:5678`, `[::1]:80`, `::1`); None when it is not one."""
    entry = entry.strip()
    if entry.startswith("["):
        entry = entry[1:entry.find("]")] if "]" in entry else ""
    elif entry.count(":") == 1:
        entry = entry.partition(":")[0]
    try:
        address = ipaddress.ip_address(entry)
    except ValueError:
        return None
    return address.ipv4_mapped or address if isinstance(address, ipaddress.IPv6Address) else address


def client_address(scope: Scope) -> str | None:
    """The client's address, as `ForwardedFor` left it in the scope: what every budget, access line and check reads."""
    client = scope.get("client")
    return client[0] if client else None


class ForwardedFor(HttpMiddleware):
    """Sets the ASGI scope's `client` to the client's address, as the module says."""

    def __init__(self, app: ASGIApp, trusted: Iterable[str]) -> None:
        super().__init__(app)
        self.trusted = parse_proxies(trusted)
        self._logged_at = -LOG_EVERY_SECONDS  # when a request without the header was last logged

    def _trusts(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
        return address is not None and any(address in network for network in self.trusted)

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.trusted:
            self._locate(scope)
        await self.app(scope, receive, send)

    def _locate(self, scope: Scope) -> None:
        peer = scope.get("client")
        if not peer or not self._trusts(_address(peer[0])):
            return
        values = [value.decode("latin-1") for name, value in scope["headers"] if name == FORWARDED_FOR]
        if not values:
            if scope["path"] not in PROBES:
                self._not_forwarding(peer[0])
            return
        entries = ",".join(values).split(",")[-MAX_ENTRIES:]
        client = peer[0]
        for entry in reversed(entries):
            address = _address(entry)
            if address is None:  # not an address: the proxy that wrote the entry to its right is as far as we know
                break
            client = str(address)
            if not self._trusts(address):
                break
        scope["client"] = (client, 0)

    def _not_forwarding(self, proxy: str) -> None:
        now = time.monotonic()
        if now - self._logged_at < LOG_EVERY_SECONDS:
            return
        self._logged_at = now
        logger.error("the trusted proxy %s sent a request without X-Forwarded-For: if it does not set the header, a "
                     "client could choose its own address. Such requests count as the proxy's own; make it set "
                     "X-Forwarded-For (manifests/haproxy/haproxy.cfg does) or stop trusting it "
                     "(AGENT_AUTOMATION_TRUSTED_PROXIES)", proxy, extra={"event": "proxy_not_forwarding"})
