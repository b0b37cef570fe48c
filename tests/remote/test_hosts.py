"""Which Host and Origin headers `/mcp` accepts, for each kind of bind address."""

from __future__ import annotations

import pytest

from agent_automation_mcp.remote.hosts import HostPolicy, split_authority


@pytest.mark.parametrize(("value", "parsed"), [
    ("mcp.example.com", ("mcp.example.com", None)), ("MCP.Example.com.:8443", ("mcp.example.com", 8443)),
    ("[::1]:8000", ("[::1]", 8000)), ("[::1]", ("[::1]", None)), ("::1", ("[::1]", None)),
    ("10.0.0.5:80", ("10.0.0.5", 80)), ("host:port", None), ("[::1", None), ("", None),
])
def test_host_headers_are_read_with_or_without_a_port(value: str, parsed: tuple[str, int | None] | None) -> None:
    assert split_authority(value) == parsed


@pytest.mark.parametrize(("bind", "host", "allowed"), [
    ("127.0.0.1", "127.0.0.1:8000", True), ("127.0.0.1", "localhost:8000", True),
    ("127.0.0.1", "attacker.example:8000", False), ("127.0.0.2", "127.0.0.2:9", True),
    ("127.0.0.2", "attacker.example", False), ("::1", "[::1]:8000", True), ("[::1]", "evil:8000", False),
    ("10.0.0.5", "10.0.0.5:8000", True), ("10.0.0.5", "evil.example", False),
    ("0.0.0.0", "anything.example", True), ("::", "anything.example", True),
])
def test_the_bind_address_is_an_allowed_host(bind: str, host: str, allowed: bool) -> None:
    assert (HostPolicy.build(bind, (), ()).refusal(host, None) is None) is allowed


def test_allowed_hosts_name_any_port_or_one_port_and_close_a_wildcard_bind() -> None:
    policy = HostPolicy.build("0.0.0.0", ("mcp.example.com", "alt.example:8443"), ())
    assert policy.refusal("mcp.example.com:443", None) is None and policy.refusal("mcp.example.com", None) is None
    assert policy.refusal("alt.example:8443", None) is None
    for host in ("alt.example:9000", "alt.example", "10.1.2.3:8000", None):
        refusal = policy.refusal(host, None)
        assert refusal is not None and refusal.status == 421


def test_a_browser_origin_must_be_allowed() -> None:
    policy = HostPolicy.build("127.0.0.1", (), ("https://app.example.com", "http://tool.example:3000"))
    assert policy.refusal("127.0.0.1:8000", None) is None  # no Origin: not a browser
    for origin in ("https://app.example.com", "https://app.example.com:8443", "http://tool.example:3000",
                   "http://localhost:5173", "http://[::1]:3000"):
        assert policy.refusal("127.0.0.1:8000", origin) is None, origin
    for origin in ("http://app.example.com", "http://tool.example:3001", "https://evil.example", "null"):
        refusal = policy.refusal("127.0.0.1:8000", origin)
        assert refusal is not None and refusal.status == 403, origin


def test_unreadable_entries_are_refused_at_start() -> None:
    with pytest.raises(ValueError, match="allowed host"):
        HostPolicy.build("0.0.0.0", ("bad host:x",), ())
    with pytest.raises(ValueError, match="allowed origin"):
        HostPolicy.build("0.0.0.0", (), ("app.example.com",))
