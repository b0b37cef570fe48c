"""The client's address from X-Forwarded-For: only what trusted proxies wrote counts."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agent_automation_mcp.remote.forwarded import ForwardedFor, parse_proxies

PROXIES = ("10.0.0.0/8", "192.0.2.1")


async def _client(middleware: ForwardedFor, peer: str, *forwarded: str, path: str = "/mcp") -> str:
    """The client address the app behind `middleware` sees for one request."""
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen["client"] = scope["client"][0]

    scope = {"type": "http", "path": path, "client": (peer, 4321),
             "headers": [(b"x-forwarded-for", value.encode()) for value in forwarded]}
    middleware.app = app
    await middleware(scope, None, None)  # type: ignore[arg-type]
    return seen["client"]


def _middleware() -> ForwardedFor:
    return ForwardedFor(None, PROXIES)  # type: ignore[arg-type]  # the app is set per request by _client


@pytest.mark.anyio
async def test_the_client_is_the_first_address_from_the_right_that_no_trusted_proxy_has() -> None:
    middleware = _middleware()
    assert await _client(middleware, "10.1.1.1", "203.0.113.9") == "203.0.113.9"
    # A chain the client started: what it wrote left of the proxies' entries never counts
    assert await _client(middleware, "10.1.1.1", "198.51.100.1, 203.0.113.9, 10.2.2.2") == "203.0.113.9"
    assert await _client(middleware, "10.1.1.1", "198.51.100.1", "203.0.113.9:5555") == "203.0.113.9"
    assert await _client(middleware, "10.1.1.1", "[2001:db8::7]:80") == "2001:db8::7"
    # Garbage where an address should be: the proxy that wrote the entry to its right is as far as we know
    assert await _client(middleware, "10.1.1.1", "nonsense, 10.3.3.3") == "10.3.3.3"
    # Not from a trusted proxy: the header is ignored
    assert await _client(middleware, "203.0.113.50", "198.51.100.1") == "203.0.113.50"


@pytest.mark.anyio
async def test_a_request_without_the_header_is_the_proxys_own_and_latches_nothing(
        caplog: pytest.LogCaptureFixture) -> None:
    """One request without X-Forwarded-For (a probe on the wrong path, a curl from inside the trusted network) once
    made the replica take every later client for the proxy, one budget for all, until it restarted."""
    middleware = _middleware()
    assert await _client(middleware, "192.0.2.1", path="/readyz") == "192.0.2.1"
    assert await _client(middleware, "192.0.2.1", "198.51.100.1") == "198.51.100.1"
    with caplog.at_level(logging.ERROR, logger="agent_automation_mcp.remote.forwarded"):
        assert await _client(middleware, "192.0.2.1") == "192.0.2.1"  # no header on /mcp: the proxy's own request
        assert await _client(middleware, "192.0.2.1") == "192.0.2.1"
    assert await _client(middleware, "192.0.2.1", "198.51.100.2") == "198.51.100.2"  # the next client is itself
    assert await _client(middleware, "10.1.1.1", "198.51.100.3") == "198.51.100.3"
    (said,) = [record for record in caplog.records if getattr(record, "event", None) == "proxy_not_forwarding"]
    assert "192.0.2.1" in said.getMessage()  # once a minute at most, naming the proxy


def test_a_trusted_proxy_must_be_an_address_or_a_network() -> None:
    assert len(parse_proxies(["10.0.0.0/8", "::1", "[::1]"])) == 3
    with pytest.raises(ValueError, match="trusted proxy"):
        parse_proxies(["balancer.internal"])
