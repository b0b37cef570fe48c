"""The pacing rule on a fake clock: no sleeping, every instant exact."""

from __future__ import annotations

import itertools
import random

import pytest

from agent_automation_mcp.api.limits import RateLimit
from agent_automation_mcp.pacing import sliding_log
from agent_automation_mcp.pacing.sliding_log import BucketLog, penalise, ready_at, settle, try_charge

MARGIN = 0.25


def logs(*limits: RateLimit) -> list[BucketLog]:
    return [BucketLog(limit, MARGIN) for limit in limits]


def most_in_any_window(times: list[float], window: float) -> int:
    """The largest number of sends inside any half-open interval of `window` seconds."""
    times = sorted(times)
    return max((sum(1 for u in times[i:] if u < t + window) for i, t in enumerate(times)), default=0)


def run_greedy(buckets: list[BucketLog], demands: list[tuple[float, list[int]]], *,
               answered: bool = False) -> list[list[float]]:
    """Serve requests (arrival time, bucket indexes) in order, each at the earliest instant allowed; `answered`:
    each is answered as it leaves (a round trip of 0), else never."""
    sent: list[list[float]] = [[] for _ in buckets]
    clock = 0.0
    for arrival, used in demands:
        clock = max(clock, arrival)
        chosen = [buckets[i] for i in used]
        while (wait := try_charge(chosen, clock)) > 0:
            clock += wait
        if answered:
            settle(chosen, clock + MARGIN, clock, "admitted")
        for i in used:
            sent[i].append(clock)
    return sent


def test_never_more_than_n_in_any_window_across_several_buckets() -> None:
    standard, logs_limit = RateLimit(6, 3.0), RateLimit(4, 5.0)
    buckets = logs(standard, logs_limit)
    rng = random.Random(7)
    demands = [(rng.uniform(0, 40), rng.choice([[0], [0, 1], [1, 0]])) for _ in range(300)]
    sent = run_greedy(buckets, sorted(demands))

    assert most_in_any_window(sent[0], standard.window + MARGIN) == standard.count
    assert most_in_any_window(sent[1], logs_limit.window + MARGIN) == logs_limit.count
    assert len(sent[0]) == 300  # every request went; none was refused


def test_a_saturated_bucket_sends_n_at_once_then_n_per_window_plus_margin() -> None:
    limit = RateLimit(5, 10.0)
    sent = run_greedy(logs(limit), [(0.0, [0])] * 15)[0]
    gap = sliding_log.stagger(limit)  # 0.5 s: a hot bucket's sends leave one by one
    assert sent[:5] == [0.0] * 5
    assert sent[5:] == pytest.approx([10.25 + k * gap for k in range(5)] + [20.5 + k * gap for k in range(5)])
    assert most_in_any_window(sent, 10.25) == 5


def test_a_bucket_that_is_not_hot_lets_a_burst_go_at_once() -> None:
    (bucket,) = buckets = logs(RateLimit(5, 10.0))
    for t in (0.0, 0.0, 0.0):
        bucket.charge(t)
    assert [try_charge(buckets, 25.0) for _ in range(5)] == [0.0] * 5  # 3 + 5 > 5, but the 3 are 2 windows old
    assert try_charge(buckets, 25.0) > 0


def test_all_or_nothing_when_one_bucket_is_full() -> None:
    full, empty = logs(RateLimit(2, 10.0), RateLimit(5, 10.0))
    full.charge(0.0)
    full.charge(1.0)

    wait = try_charge([full, empty], 2.0)

    assert wait == pytest.approx(10.0 + MARGIN - 2.0)
    assert list(empty.sends) == []
    assert list(full.sends) == [0.0 + MARGIN, 1.0 + MARGIN]


def test_bulk_fills_only_its_share_and_interactive_takes_the_rest() -> None:
    (bucket,) = logs(RateLimit(8, 10.0))
    granted_bulk = sum(try_charge([bucket], 0.0, bulk=True) == 0 for _ in range(8))
    granted_interactive = sum(try_charge([bucket], 0.0) == 0 for _ in range(8))
    assert sliding_log.bulk_cap(bucket.limit) == granted_bulk == 6
    assert granted_interactive == 2


def test_estimate_for_queued_sends_matches_the_schedule() -> None:
    (bucket,) = logs(RateLimit(3, 10.0))
    for t in (0.0, 1.0, 2.0):
        bucket.charge(t)
    expected = [10.25, 11.25, 12.25, 20.5, 21.5]
    assert [bucket.ready_at(5.0, ahead=k) for k in range(5)] == expected


def test_after_a_429_the_bucket_pauses_until_retry_after_then_spaces_evenly() -> None:
    limit = RateLimit(5, 10.0)
    (bucket,) = buckets = logs(limit)
    for _ in range(5):
        bucket.charge(0.0)

    pause = penalise(buckets, 1.0, retry_after=4.0)

    assert pause == 4.0
    assert ready_at(buckets, 1.0) == 10.25  # the log itself still holds until then
    interval = sliding_log.spacing_interval(limit)
    sent = run_greedy(buckets, [(1.0, [0])] * 6, answered=True)[0]
    assert sent[0] == 10.25
    assert [round(b - a, 9) for a, b in itertools.pairwise(sent)] == [round(interval, 9)] * 5
    assert most_in_any_window(sent, limit.window) <= limit.count - 1  # no burst a window counter could refuse


def test_while_spacing_a_little_lateness_is_made_up_and_more_starts_the_slots_anew() -> None:
    limit = RateLimit(5, 10.0)
    (bucket,) = buckets = logs(limit)
    interval, catch_up = sliding_log.spacing_interval(limit), sliding_log.catch_up(limit)
    penalise(buckets, 0.0, retry_after=1.0)
    assert try_charge(buckets, 1.0) == 0
    settle(buckets, 1.0 + MARGIN, 1.0, "admitted")  # the probe is accepted
    late = 1.0 + interval + catch_up / 2  # woke up a little late
    assert try_charge(buckets, late) == 0
    assert ready_at(buckets, late) == pytest.approx(1.0 + 2 * interval)  # the schedule did not move
    very_late = 1.0 + 2 * interval + 2 * catch_up
    assert try_charge(buckets, very_late) == 0
    assert ready_at(buckets, very_late) == pytest.approx(very_late + interval)  # slots start anew from it
    assert bucket.slot == very_late


def test_sends_that_leave_late_keep_the_rate_and_never_crowd_a_window() -> None:
    limit = RateLimit(5, 10.0)  # spacing (2.5 s) binds here, not the log (5 in 10.25 s)
    buckets = logs(limit)
    interval = sliding_log.spacing_interval(limit)
    penalise(buckets, 0.0, retry_after=1.0)
    rng = random.Random(7)
    clock, sent = 1.0, []
    for _ in range(400):
        clock = ready_at(buckets, clock) + rng.uniform(0, 0.2 * interval)  # every wake-up a little late
        assert try_charge(buckets, clock) == 0
        settle(buckets, clock + MARGIN, clock, "admitted")
        sent.append(clock)
    assert sent[-1] - sent[0] < 400 * interval  # the lateness did not add up: the rate is the spacing's
    assert most_in_any_window(sent, limit.window) <= limit.count


def test_the_pause_holds_back_even_an_empty_bucket() -> None:
    (bucket,) = buckets = logs(RateLimit(60, 30.0))
    penalise(buckets, 100.0, retry_after=7.5)
    assert ready_at(buckets, 100.0) == 107.5
    assert try_charge(buckets, 101.0) == pytest.approx(6.5)
    assert list(bucket.sends) == []


@pytest.mark.parametrize(("given", "pause"), [(0.0, 1.0), (0.2, 1.0), (30.0, 30.0), (900.0, 120.0)])
def test_retry_after_is_clamped(given: float, pause: float) -> None:
    assert penalise(logs(RateLimit(5, 10.0)), 0.0, retry_after=given) == pause


def test_without_retry_after_the_backoff_grows_with_repeated_429s() -> None:
    (bucket,) = buckets = logs(RateLimit(5, 10.0))
    rng = random.Random(1)
    pauses = []
    for k in range(8):
        now = 1000.0 + k * 40  # each 429 after the previous pause, within STRIKE_MEMORY
        pauses.append(penalise(buckets, now, retry_after=None, rng=rng))
    assert all(sliding_log.MIN_PAUSE <= p <= min(sliding_log.BACKOFF_CAP, 2**k) for k, p in enumerate(pauses))
    assert bucket.strikes == 8
    penalise(buckets, 2000.0, None, rng)  # long after: starts over
    assert bucket.strikes == 1


def test_a_429_adapts_only_the_buckets_that_can_explain_it() -> None:
    setup, standard = buckets = logs(RateLimit(5, 60.0), RateLimit(6, 30.0))
    for t in range(6):
        standard.charge(float(t))
    setup.charge(0.0)

    penalise(buckets, 10.0, retry_after=3.0)

    assert standard.pause_until == 13.0 and standard.spacing_until > 10.0
    assert setup.pause_until == float("-inf") and setup.spacing_until == float("-inf")


def test_a_429_no_bucket_explains_pauses_only_the_tightest_never_the_shared_standard() -> None:
    standard, agent_creation = buckets = logs(RateLimit(60, 30.0), RateLimit(10, 60.0))
    standard.charge(0.0)
    agent_creation.charge(0.0)
    assert penalise(buckets, 10.0, retry_after=99999.0) == sliding_log.MAX_PAUSE  # clamped
    assert agent_creation.pause_until == 10.0 + sliding_log.MAX_PAUSE
    assert standard.pause_until == float("-inf") and standard.spacing_until == float("-inf")
    assert ready_at([standard], 10.0) == 10.0  # every other operation goes on at once


def test_a_log_is_idle_once_it_can_no_longer_delay_anything() -> None:
    (bucket,) = logs(RateLimit(5, 10.0))
    bucket.charge(0.0)
    assert not bucket.idle(20.0)
    assert bucket.idle(20.25)


def test_a_replica_cut_off_counts_the_window_full_then_paces_at_its_share() -> None:
    """However little it saw sent, the others may have filled the window before it lost sight of them."""
    log = BucketLog(RateLimit(12, 10.0), MARGIN, weight=3)  # one of 3 replicas
    log.charge(0.0)  # the one send it knows of
    log.penalise(0.5, 2.0)  # what a 429 taught it stays
    log.fill(1.0)
    assert list(log.sends) == [1.0 + MARGIN] * 12 and log.last_sent == 1.0
    assert log.pause_until == 2.5 and log.spacing_until > 1.0
    assert ready_at([log], 1.0) == 11.25  # nothing until the window in which they may have sent has passed


def test_once_the_window_it_was_cut_off_in_has_passed_a_replica_sends_its_share() -> None:
    log = BucketLog(RateLimit(12, 10.0), MARGIN, weight=3)
    log.fill(1.0)
    sent = run_greedy([log], [(1.0, [0])] * 8)[0]
    assert sent[0] == 11.25 and most_in_any_window(sent, 10.0) == 4  # a third of the limit: 12 / 3


def test_a_send_answered_frees_its_slot_a_window_after_the_answer_not_after_departure_plus_margin() -> None:
    (bucket,) = buckets = logs(RateLimit(2, 10.0))
    assert try_charge(buckets, 0.0) == 0 and try_charge(buckets, 0.0) == 0
    settle(buckets, MARGIN, 0.1, "admitted")  # answered 0.1 s after it left: the service stamped it by then
    assert list(bucket.sends) == [0.1, MARGIN]
    assert ready_at(buckets, 1.0) == pytest.approx(10.1)  # was 10.25
    assert ready_at(buckets, 1.0, ahead=1) == pytest.approx(10.25)  # the other, never answered, keeps its bound
    settle(buckets, MARGIN, 0.5, "admitted")  # an answer after the bound cannot raise it
    assert list(bucket.sends) == [0.1, MARGIN]


def test_a_send_without_an_answer_keeps_its_bound() -> None:
    (bucket,) = buckets = logs(RateLimit(2, 10.0))
    try_charge(buckets, 0.0)
    settle(buckets, MARGIN, 0.1, "unanswered")
    assert list(bucket.sends) == [MARGIN]


def test_settled_bounds_stay_in_order_and_only_the_largest_are_kept() -> None:
    (bucket,) = buckets = logs(RateLimit(3, 10.0))
    for t in (0.0, 0.1, 0.2):
        try_charge(buckets, t)
    settle(buckets, 0.2 + MARGIN, 0.21, "admitted")  # the newest, answered first, drops below the others
    assert list(bucket.sends) == pytest.approx([0.21, 0.25, 0.35])
    assert ready_at(buckets, 1.0) == pytest.approx(10.21)
    clock = ready_at(buckets, 1.0)
    assert try_charge(buckets, clock) == 0
    assert list(bucket.sends) == pytest.approx([0.25, 0.35, clock + MARGIN])  # the smallest bound left the log
    settle(buckets, 0.0 + MARGIN, 0.05, "admitted")
    assert list(bucket.sends) == pytest.approx([0.05, 0.35, clock + MARGIN])


def test_settling_a_send_counted_several_times_lowers_every_copy() -> None:
    log = BucketLog(RateLimit(4, 10.0), MARGIN, weight=2)  # a replica cut off from Redis, one of 2
    try_charge([log], 0.0)
    try_charge([log], 0.1)
    settle([log], 0.1 + MARGIN, 0.2, "admitted")
    assert list(log.sends) == pytest.approx([0.2, 0.2, MARGIN, MARGIN])
    assert ready_at([log], 1.0) == pytest.approx(10.2)  # room for 2 once the two settled copies leave


def test_spacing_and_stagger_count_from_the_last_departure_not_from_a_bound() -> None:
    limit = RateLimit(4, 10.0)
    (bucket,) = buckets = logs(limit)
    for _ in range(4):
        try_charge(buckets, 0.0)
    clock = ready_at(buckets, 1.0)  # hot from here on: sends a stagger apart
    try_charge(buckets, clock)
    assert bucket.last_sent == clock
    settle(buckets, clock + MARGIN, clock + 0.01, "admitted")
    assert ready_at(buckets, clock) == pytest.approx(clock + sliding_log.stagger(limit))


def test_after_a_429_one_probe_at_a_time_until_one_is_let_through() -> None:
    limit = RateLimit(60, 30.0)
    (bucket,) = buckets = logs(limit)
    interval = sliding_log.spacing_interval(limit)
    penalise(buckets, 0.0, retry_after=1.0)
    assert try_charge(buckets, 1.0) == 0  # the probe
    probe = 1.0 + MARGIN
    assert bucket.probe == probe
    later = 1.0 + 3 * interval  # spacing alone would let the next go long before
    assert ready_at(buckets, later) == pytest.approx(later + interval)  # no answer yet: look again an interval on
    penalise(buckets, later, retry_after=2.0)  # the probe was refused: the caller penalises, then settles
    settle(buckets, probe, later, "refused")
    assert bucket.probing and bucket.probe is None
    assert try_charge(buckets, later + 2.0) == 0  # after the pause: the next probe
    assert bucket.probe == later + 2.0 + MARGIN
    settle(buckets, later + 2.0 + MARGIN, later + 2.1, "admitted")  # let through: even spacing from now on
    assert not bucket.probing and bucket.probe is None
    assert ready_at(buckets, later + 2.1) == pytest.approx(later + 2.0 + interval)


def test_a_probe_whose_answer_is_lost_holds_its_bucket_back_at_most_its_lease() -> None:
    limit = RateLimit(60, 30.0)
    (bucket,) = buckets = logs(limit)
    penalise(buckets, 0.0, retry_after=1.0)
    try_charge(buckets, 1.0)
    waits = []
    clock = 1.0
    while (wait := try_charge(buckets, clock)) > 0:  # bounded: each look is an interval on, and the lease ends
        waits.append(wait)
        clock += wait
    assert clock == pytest.approx(1.0 + sliding_log.PROBE_LEASE)
    assert max(waits) <= sliding_log.spacing_interval(limit) + 1e-9
    assert bucket.probe == clock + MARGIN  # the send after the lease is the next probe


def test_a_probe_that_never_got_an_answer_lets_the_next_send_probe_at_once() -> None:
    limit = RateLimit(5, 10.0)
    (bucket,) = buckets = logs(limit)
    penalise(buckets, 0.0, retry_after=1.0)
    try_charge(buckets, 1.0)
    settle(buckets, 1.0 + MARGIN, 1.2, "unanswered")  # a connection error: nothing learned
    assert bucket.probing and bucket.probe is None
    assert list(bucket.sends) == [1.0 + MARGIN]
    assert ready_at(buckets, 1.2) == pytest.approx(1.0 + sliding_log.spacing_interval(limit))
