"""What the server keeps per token stays bounded in count and age, however many tokens it sees."""

from __future__ import annotations

import time

import anyio
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


@pytest.mark.anyio
async def test_calls_past_a_tenants_cap_wait_in_line_and_only_a_wait_past_the_deadline_is_refused() -> None:
    slots = TenantSlots(2)
    order: list[int] = []
    first = anyio.Event()

    async def call(i: int, seconds: float) -> None:
        async with slots.hold("a", time.monotonic() + 5):
            order.append(i)
            await (first.wait() if i < 2 else anyio.sleep(seconds))

    async with anyio.create_task_group() as group:
        for i in range(6):
            group.start_soon(call, i, 0.01 * (6 - i))
            await anyio.sleep(0.01)  # they arrive in this order
        async with slots.hold("b", time.monotonic()):  # another tenant is not held up
            assert order == [0, 1]
        first.set()
    assert order == [0, 1, 2, 3, 4, 5] and len(slots) == 0  # first come, first served; nothing left behind
    async with slots.hold("a", time.monotonic() + 1), slots.hold("a", time.monotonic() + 1):
        with pytest.raises(RateLimitError, match=r"cap \(2\).*deadline came first") as refused:  # it waited in line
            async with slots.hold("a", time.monotonic() + 0.2):
                pass
        assert refused.value.retry_after
    assert len(slots) == 0


@pytest.mark.anyio
async def test_a_waiting_call_cancelled_passes_its_slot_on() -> None:
    slots = TenantSlots(1)
    served: list[str] = []

    async def call(name: str) -> None:
        async with slots.hold("a", time.monotonic() + 5):
            served.append(name)

    async with anyio.create_task_group() as group, slots.hold("a", time.monotonic() + 5):
        async with anyio.create_task_group() as doomed:
            doomed.start_soon(call, "cancelled")
            await anyio.sleep(0.05)
            doomed.cancel_scope.cancel()
        group.start_soon(call, "next")
        await anyio.sleep(0.05)
        assert served == []
    assert served == ["next"] and len(slots) == 0
