"""The in-process pacer under real concurrency, on tiny windows. Asserts counts and orderings, not durations."""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import pytest

from agent_automation_mcp.api.errors import RateLimitError
from agent_automation_mcp.api.limits import RateLimit
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.pacing import FifoPacer, MemoryLedger, create_pacer
from schedstat import Mark

pytestmark = pytest.mark.anyio

TOKEN = "a1b2c3"
MARGIN = 0.02
LIMITS = {"standard": RateLimit(5, 0.25), "logs": RateLimit(3, 0.25)}


class RecordingClock:
    """`time.monotonic`, remembering the instant each charge was made at (the ledger reads it just before)."""

    def __init__(self) -> None:
        self.last = 0.0

    def __call__(self) -> float:
        self.last = time.monotonic()
        return self.last


class Recorder:
    """Pacer plus the exact charge instants per bucket, taken from the ledger's own clock."""

    def __init__(self, limits: dict[str, RateLimit] = LIMITS) -> None:
        self.clock = RecordingClock()
        self.ledger = MemoryLedger(limits, margin=MARGIN, clock=self.clock)
        self.pacer = FifoPacer(self.ledger, limits)
        self.sent: dict[str, list[float]] = {name: [] for name in limits}
        self.order: list[str] = []

    async def call(self, name: str, buckets: tuple[str, ...], *, bulk: bool = False,
                   deadline: float | None = None) -> None:
        await self.pacer.acquire(TOKEN, buckets, deadline, bulk=bulk)
        for bucket in buckets:
            self.sent[bucket].append(self.clock.last)
        self.order.append(name)


def most_in_any_window(times: list[float], window: float) -> int:
    times = sorted(times)
    return max((sum(1 for u in times[i:] if u < t + window) for i, t in enumerate(times)), default=0)


async def start_in_order(tg: anyio.abc.TaskGroup, calls: list[Callable[[], object]]) -> None:
    """Start tasks one at a time, each reaching its queue before the next starts."""
    for call in calls:
        tg.start_soon(call)
        await anyio.sleep(0.001)


async def test_waiters_are_served_first_come_first_served() -> None:
    rec = Recorder()
    async with anyio.create_task_group() as tg:
        await start_in_order(tg, [lambda i=i: rec.call(str(i), ("standard",)) for i in range(12)])
    assert rec.order == [str(i) for i in range(12)]
    assert most_in_any_window(rec.sent["standard"], 0.25 + MARGIN) == 5


async def test_overlapping_bucket_sets_stay_within_every_limit_and_all_go() -> None:
    rec = Recorder()
    async with anyio.create_task_group() as tg:
        for i in range(24):
            tg.start_soon(rec.call, str(i), ("logs", "standard") if i % 3 == 0 else ("standard",))
    assert len(rec.order) == 24
    assert most_in_any_window(rec.sent["standard"], 0.25 + MARGIN) == 5
    assert most_in_any_window(rec.sent["logs"], 0.25 + MARGIN) == 3


async def test_a_standard_call_does_not_queue_behind_one_waiting_for_logs() -> None:
    rec = Recorder()
    for _ in range(3):
        await rec.call("fill", ("logs", "standard"))
    async with anyio.create_task_group() as tg:
        await start_in_order(tg, [lambda: rec.call("logs", ("logs", "standard")),
                                  lambda: rec.call("standard", ("standard",))])
    assert rec.order[3:] == ["standard", "logs"]


async def test_bulk_paging_does_not_starve_interactive_calls() -> None:
    limits = {"standard": RateLimit(8, 1.0)}  # a window a busy machine's pauses fit in many times over
    rec = Recorder(limits)
    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(lambda i=i: rec.call(f"bulk{i}", ("standard",), bulk=True))
        with anyio.fail_after(5):  # the pager holds its first share and queues the rest
            while len(rec.order) < 6:
                await anyio.sleep(0.001)
        await start_in_order(tg, [lambda j=j: rec.call(f"chat{j}", ("standard",)) for j in range(2)])
    # 6 bulk pages (75 % of 8) go at once; the two interactive calls take the free slots right away.
    assert rec.order[:8] == [f"bulk{i}" for i in range(6)] + ["chat0", "chat1"]
    assert most_in_any_window(rec.sent["standard"], 1.0 + MARGIN) == 8


async def test_a_cancelled_waiter_leaves_the_queue_and_is_never_charged() -> None:
    rec = Recorder()
    for i in range(5):
        await rec.call(f"fill{i}", ("standard",))
    doomed = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        await start_in_order(tg, [lambda: _call_in(doomed, rec, "doomed"), lambda: rec.call("next", ("standard",))])
        doomed.cancel()
    assert rec.order == [f"fill{i}" for i in range(5)] + ["next"]
    assert len(rec.ledger._logs[TOKEN, "standard"].sends) == 5  # the full log: 4 fills and "next"
    assert rec.pacer._queues == {}


async def _call_in(scope: anyio.CancelScope, rec: Recorder, name: str) -> None:
    with scope:
        await rec.call(name, ("standard",))


async def test_a_wait_past_the_deadline_fails_at_once_and_charges_nothing() -> None:
    rec = Recorder({"standard": RateLimit(2, 30.0)})
    await rec.call("a", ("standard",))
    await rec.call("b", ("standard",))
    started = Mark()
    with pytest.raises(RateLimitError) as caught:
        await rec.call("c", ("standard",), deadline=time.monotonic() + 5)
    freed = rec.sent["standard"][0] + MARGIN + 30.0  # when a's slot frees
    assert freed - time.monotonic() - 0.001 <= caught.value.retry_after <= 30.03  # (to the millisecond)
    assert started.ran_until(Mark()) < 1  # it did not wait for the deadline to find out (of the time it ran)
    assert list(rec.ledger._logs[TOKEN, "standard"].sends) == [t + MARGIN for t in rec.sent["standard"]]  # bounds


async def test_a_queued_waiter_whose_turn_comes_too_late_fails_with_an_estimate() -> None:
    rec = Recorder({"standard": RateLimit(2, 0.3)})
    async with anyio.create_task_group() as tg:
        for i in range(6):
            tg.start_soon(rec.call, str(i), ("standard",))
        await anyio.sleep(0.01)
        with pytest.raises(RateLimitError) as caught:
            await rec.call("late", ("standard",), deadline=time.monotonic() + 0.2)
    assert caught.value.retry_after > 0.2
    assert "late" not in rec.order and len(rec.order) == 6


async def test_rate_limited_pauses_the_token_for_retry_after() -> None:
    rec = Recorder()
    await rec.call("a", ("standard",))
    paused = time.monotonic()
    assert await rec.pacer.rate_limited(TOKEN, ["standard"], 2.5) == pytest.approx(2.5, abs=0.01)
    with pytest.raises(RateLimitError) as caught:
        await rec.call("b", ("standard",), deadline=time.monotonic() + 1)
    assert paused + 2.5 - time.monotonic() - 0.001 <= caught.value.retry_after <= 2.5  # the pause left, to the ms


async def test_unknown_buckets_are_a_bug_in_the_caller() -> None:
    with pytest.raises(ValueError, match="unknown"):
        await Recorder().pacer.acquire(TOKEN, ["nope"], None)


async def test_create_pacer_without_redis_paces_in_memory() -> None:
    pacer = create_pacer(ApiSettings(rate_limits={"standard": RateLimit(1, 60)}, rate_margin=0.1))
    await pacer.acquire(TOKEN, ("standard",), None)
    with pytest.raises(RateLimitError):
        await pacer.acquire(TOKEN, ("standard",), time.monotonic() + 1)
    assert isinstance(pacer.ledger, MemoryLedger)
    await pacer.aclose()
