"""What the server keeps per token stays bounded in count and age, however many tokens it sees."""

from __future__ import annotations

import pytest

from agent_automation_mcp.api.errors import RateLimitError
from agent_automation_mcp.caching import ExpiringCache
from agent_automation_mcp.tools.callers import TenantSlots


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_entries_expire_and_the_least_recently_used_go_first() -> None:
    clock = Clock()
    cache: ExpiringCache[int] = ExpiringCache(3, clock=clock)
    for i in range(10_000):
        cache.put(f"token-{i}", i, ttl=60)
    assert len(cache) == 3 and cache.get("token-0") is None and cache.get("token-9999") == 9999
    cache.get("token-9997")  # used: kept over 9998
    cache.put("new", 1, ttl=5)
    assert cache.get("token-9998") is None and cache.get("token-9997") == 9997
    clock.now = 6
    assert cache.get("new") is None and cache.get("token-9997") == 9997


def test_a_tenant_past_its_cap_is_refused_and_its_count_is_forgotten_when_idle() -> None:
    slots = TenantSlots(2)
    with slots.hold("a"), slots.hold("a"), slots.hold("b"):
        with pytest.raises(RateLimitError, match="2 calls in flight"), slots.hold("a"):
            pass
        assert len(slots) == 2
    assert len(slots) == 0
