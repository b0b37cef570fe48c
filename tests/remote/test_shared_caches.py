"""The per-token caches and the per-address budgets in one process: without Redis, and with a Redis that is away."""

from __future__ import annotations

import socket

import anyio
import pytest

from agent_automation_mcp.caching import SharedCache, SharedStore
from agent_automation_mcp.redis_pool import redis_client
from agent_automation_mcp.remote.budgets import AddressBudgets, Budget, OverBudget, network_of


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
async def test_the_budget_holds_per_address_per_network_and_in_total_and_says_when_a_check_frees() -> None:
    budgets = AddressBudgets(SharedStore(), [Budget("strangers", 2, 3, 8, window=2.0), Budget("token", 1, 1)])
    for _ in range(2):
        await budgets.spend("strangers", "10.0.0.1")
    with pytest.raises(OverBudget) as refused:  # the address: 2
        await budgets.spend("strangers", "10.0.0.1")
    assert 1.5 < refused.value.retry_after <= 2.0 and refused.value.purpose == "strangers"
    await budgets.spend("strangers", "10.0.0.2")
    with pytest.raises(OverBudget):  # its /24: 3, whichever of its addresses
        await budgets.spend("strangers", "10.0.0.3")
    await budgets.spend("token", "10.0.0.1")  # each purpose has its own budget
    with pytest.raises(OverBudget):
        await budgets.spend("token", "10.0.0.1")
    await budgets.spend("strangers", "2001:db8:0:1::1")
    with pytest.raises(OverBudget):  # an IPv6 /64 is one network, as a /24 is
        for host in range(2, 5):
            await budgets.spend("strangers", f"2001:db8:0:1::{host}")
    await budgets.spend("strangers", None)
    await budgets.spend("strangers", "10.0.1.1")
    with pytest.raises(OverBudget):  # the total of the networks nobody vouched for: 8
        await budgets.spend("strangers", "10.0.2.1")
    await budgets.vouch("10.0.3.200")  # a token the service accepted came from 10.0.3.0/24
    await budgets.spend("strangers", "10.0.3.1")  # so the strangers' total does not hold it back
    for _ in range(3):  # the window slides: a check frees up once the wait it names has passed
        try:
            await budgets.spend("strangers", "10.0.0.1")
            break
        except OverBudget as exc:
            await anyio.sleep(exc.retry_after)
    else:
        pytest.fail("no check freed after the waits the budget named")


@pytest.mark.anyio
async def test_a_budget_without_networks_counts_each_key_alone() -> None:
    """A token's budget is keyed by its hash, which has no network: keys that look alike never share a count."""
    budgets = AddressBudgets(SharedStore(), [Budget("per-token", 2, None)])
    for key in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        for _ in range(2):
            await budgets.spend("per-token", key)
        with pytest.raises(OverBudget):
            await budgets.spend("per-token", key)

def test_budgets_count_networks_of_24_and_64_addresses() -> None:
    assert network_of("192.0.2.77") == "192.0.2.0/24"
    assert network_of("2001:db8:1:2:3:4:5:6") == "2001:db8:1:2::/64"
    assert network_of("::ffff:192.0.2.77") == "192.0.2.0/24"  # IPv4 seen through an IPv6 socket
    assert network_of(None) == "-" and network_of("unix-socket") == "unix-socket"
    with pytest.raises(ValueError, match="per network must be at least"):
        Budget("strangers", 5, 4)
