"""Rate limits: the three algorithms on a synthetic clock, then over HTTP with and without Retry-After."""

from __future__ import annotations

import time

import pytest

from agent_automation_mcp.api.limits import DEFAULT_RATE_LIMITS, STANDARD, RateLimit, parse_rate_limits
from agent_automation_mcp.sandbox.ratelimit import FixedWindow, RateLimiter, SlidingCounter, SlidingLog

from .conftest import MakeSandbox, client_for, org_path

FIVE_PER_10S = RateLimit(5, 10)


def admitted(counter: FixedWindow | SlidingLog | SlidingCounter, times: list[float]) -> list[bool]:
    results = []
    for now in times:
        allowed = counter.wait(now) == 0
        if allowed:
            counter.charge(now)
        results.append(allowed)
    return results


def test_sliding_log_allows_at_most_n_in_any_window() -> None:
    log = SlidingLog(FIVE_PER_10S)
    assert admitted(log, [0, 1, 2, 3, 4, 5, 9.9]) == [True] * 5 + [False, False]
    assert log.wait(9.9) == pytest.approx(0.1)
    assert admitted(log, [10.0, 10.5, 11.0]) == [True, False, True]


def test_fixed_window_resets_at_the_seeded_phase() -> None:
    window = FixedWindow(FIVE_PER_10S, phase=3.0)  # windows [3, 13), [13, 23), ...
    assert admitted(window, [4, 5, 6, 7, 8, 12]) == [True] * 5 + [False]
    assert window.wait(12) == pytest.approx(1.0)
    assert admitted(window, [13, 13, 13, 13, 13, 13]) == [True] * 5 + [False]  # a burst across the boundary


def test_sliding_counter_weighs_the_previous_window() -> None:
    counter = SlidingCounter(FIVE_PER_10S, phase=0.0)
    assert admitted(counter, [1, 2, 3, 4, 5]) == [True] * 5
    # At 12 s the previous window still weighs 5 * 0.8 = 4: one more request fits, not two.
    assert admitted(counter, [12, 12.1]) == [True, False]
    wait = counter.wait(12.1)
    assert admitted(counter, [12.1 + wait]) == [True]  # the estimate said exactly when
    assert admitted(counter, [40, 40, 40, 40, 40, 40]) == [True] * 5 + [False]  # old windows are forgotten


def test_a_request_is_charged_to_all_its_buckets_or_to_none() -> None:
    limiter = RateLimiter({"standard": RateLimit(3, 60), "agent_creation": RateLimit(1, 60)}, "sliding-log")
    assert limiter.admit("t", ("agent_creation", "standard"), 0) is None
    rejection = limiter.admit("t", ("agent_creation", "standard"), 1)
    assert rejection is not None and rejection.bucket == "agent_creation" and rejection.retry_after == pytest.approx(59)
    assert limiter.admit("t", ("standard",), 2) is None  # the refused create was not charged to standard
    assert limiter.admit("t", ("standard",), 3) is None
    assert limiter.admit("t", ("standard",), 4) is not None
    assert limiter.admit("other-token", ("standard",), 4) is None  # per token


@pytest.mark.parametrize("algorithm", ["fixed", "sliding-log", "sliding-counter"])
@pytest.mark.parametrize("retry_after", [True, False])
def test_429_over_http(make_sandbox: MakeSandbox, algorithm: str, retry_after: bool) -> None:
    # 0.4 s for the burst's 5 requests, which a busy machine may take more than 0.2 s for; any wait still under a
    # second (a counter's up to two windows), so Retry-After is 1.
    sandbox = make_sandbox(rate_limits=parse_rate_limits("standard=5/0.4s"), algorithm=algorithm,
                           retry_after=retry_after, tokens=("first", "second"))
    with client_for(sandbox, "first") as api, client_for(sandbox, "second") as other:
        statuses = []
        for _ in range(50):  # bounded: a burst meets the limit within a few requests
            limited = api.get("/v1/users/me")
            statuses.append(limited.status_code)
            if limited.status_code == 429:
                break
        assert statuses[:5] == [200] * 5 and statuses[-1] == 429
        assert other.get("/v1/users/me").status_code == 200  # limits are per token
        time.sleep(0.85)  # two whole windows: every algorithm has forgotten the burst
        assert api.get("/v1/users/me").status_code == 200
    assert limited.json()["status_code"] == 429 and limited.json()["message"].startswith("Rate limit exceeded")
    assert limited.headers.get("Retry-After") == ("1" if retry_after else None)  # whole seconds, rounded up


def test_every_bucket_of_the_contract_is_enforced(make_sandbox: MakeSandbox) -> None:
    spec = ",".join(f"{bucket}={1000 if bucket == STANDARD else 1}/60s" for bucket in DEFAULT_RATE_LIMITS)
    sandbox = make_sandbox(rate_limits=parse_rate_limits(spec))
    calls = [
        ("POST", org_path(sandbox, "/agent/run"), {"prompt": "x"}, "agent_creation"),
        ("POST", org_path(sandbox, "/setup-commands/generate"), {"repo_id": 201}, "setup_commands"),
        ("POST", org_path(sandbox, "/sandbox/601/analyze-logs"), None, "log_analysis"),
        ("GET", org_path(sandbox, "/agent/run/401/logs"), None, "logs"),
        ("PATCH", org_path(sandbox, "/prs/301"), {"state": "open"}, "pr_edit"),
        ("POST", org_path(sandbox, "/webhooks/agent-run/test"), {"url": "https://e.com"}, "webhook_test"),
        ("GET", org_path(sandbox, "/cli/rules"), None, "cli_rules"),
    ]
    missing = set(DEFAULT_RATE_LIMITS) - {STANDARD} - {bucket for *_, bucket in calls}
    assert not missing, f"no call here spends {sorted(missing)} (api/limits.py): add one per bucket"
    with client_for(sandbox) as api:
        for method, path, body, bucket in calls:
            assert api.request(method, path, json=body).status_code == 200, bucket
            second = api.request(method, path, json=body)
            assert second.status_code == 429 and f"({bucket})" in second.json()["message"], bucket
        # The alpha logs path shares the logs bucket; the PR edit buckets are shared by both edit operations.
        assert api.get(f"/v1/alpha/organizations/{sandbox.org_id}/agent/run/401/logs").status_code == 429
        assert api.patch(org_path(sandbox, "/repos/201/prs/301"), json={"state": "open"}).status_code == 429
        assert api.get("/v1/users/me").status_code == 200
