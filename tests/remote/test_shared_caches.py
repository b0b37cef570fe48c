"""The per-token caches and the per-address budgets in one process: without Redis, and with a Redis that is away."""

from __future__ import annotations

import socket

import anyio
import pytest

from agent_automation_mcp.caching import SharedCache, SharedStore
from agent_automation_mcp.redis_pool import redis_client
from agent_automation_mcp.remote.budgets import AddressBudgets, Budget, OverBudget


def unreachable_redis_url() -> str:
    with socket.socket() as sock:  # a port nothing listens on once this closes
        sock.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{sock.getsockname()[1]}/0"


@pytest.mark.anyio
@pytest.mark.parametrize("url", [None, "unreachable"])
async def test_a_value_is_fetched_once_however_many_ask_and_redis_away_falls_back_to_memory(url: str | None) -> None:
    store = SharedStore(redis_client(unreachable_redis_url()) if url else None)
    cache: SharedCache[int] = SharedCache(store, "test", 10)
    fetched: list[str] = []

    async def fetch() -> tuple[int, float]:
        fetched.append("k")
        await anyio.sleep(0.05)
        return 7, 60.0

    answers: list[int | None] = []

    async def ask() -> None:
        answers.append(await cache.remembered("k", fetch, fetch_seconds=5))

    try:
        async with anyio.create_task_group() as group:
            for _ in range(20):
                group.start_soon(ask)
    finally:
        await store.aclose()
    assert answers == [7] * 20 and fetched == ["k"]


@pytest.mark.anyio
async def test_a_fetch_that_fails_is_not_remembered_and_the_next_asker_fetches() -> None:
    cache: SharedCache[int] = SharedCache(SharedStore(), "test", 10)
    answers = iter([None, (3, 60.0)])

    async def fetch() -> tuple[int, float] | None:
        return next(answers)

    assert await cache.remembered("k", fetch, fetch_seconds=1) is None
    assert await cache.remembered("k", fetch, fetch_seconds=1) == 3
    assert await cache.get("k") == 3


@pytest.mark.anyio
async def test_the_budget_holds_per_address_and_in_total_and_says_when_a_check_frees() -> None:
    budgets = AddressBudgets(SharedStore(), [Budget("strangers", 3, 5, window=2.0), Budget("token", 1)])
    for _ in range(3):
        await budgets.spend("strangers", "10.0.0.1")
    with pytest.raises(OverBudget) as refused:
        await budgets.spend("strangers", "10.0.0.1")
    assert 1.5 < refused.value.retry_after <= 2.0 and refused.value.purpose == "strangers"
    await budgets.spend("token", "10.0.0.1")  # each purpose has its own budget
    with pytest.raises(OverBudget):
        await budgets.spend("token", "10.0.0.1")
    await budgets.spend("strangers", "10.0.0.2")
    await budgets.spend("strangers", None)
    with pytest.raises(OverBudget):  # the total: 5 in the window
        await budgets.spend("strangers", "10.0.0.3")
    for _ in range(3):  # the window slides: a check frees up once the wait it names has passed
        try:
            await budgets.spend("strangers", "10.0.0.1")
            break
        except OverBudget as exc:
            await anyio.sleep(exc.retry_after)
    else:
        pytest.fail("no check freed after the waits the budget named")
