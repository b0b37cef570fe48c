"""The label values the alerts read are exported at 0 before anything happens, so that a flood's first increments
show in `rate()`; and the catalogue of those values is the code's: every refusal reason the gate or the sign-in
budget names is in it, with the status it is answered with."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from prometheus_client import Counter
from prometheus_client.parser import text_string_to_metric_families

from agent_automation_mcp.api.limits import DEFAULT_RATE_LIMITS
from agent_automation_mcp.remote import access, organizations
from agent_automation_mcp.remote.metrics import (
    BUDGET_REFUSALS,
    BUDGETED_SIGNIN,
    FAMILIES,
    REFUSALS,
    SERVICE_SIDE_FAILURES,
    UPSTREAM_STATUSES,
    Metrics,
)

REMOTE: Final = Path(access.__file__).parent
Sample = tuple[str, frozenset[tuple[str, str]]]


def samples(metrics: Metrics) -> dict[Sample, float]:
    text = metrics.exposition("reachable").decode()
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def sample(name: str, **labels: str) -> Sample:
    return name, frozenset(labels.items())


def test_before_any_request_every_refusal_verdict_and_status_the_alerts_read_is_at_0() -> None:
    exported = samples(Metrics())
    for status, reason in REFUSALS:
        assert exported[sample("agent_automation_http_refused_total", status=status, reason=reason)] == 0
        assert exported[sample("agent_automation_http_responses_total", status=status)] == 0
    for status in ("200", "500", "503"):  # the outage alert's share of 5xx
        assert exported[sample("agent_automation_http_responses_total", status=status)] == 0
    for verdict in ("accepted", "refused", "undecided"):
        assert exported[sample("agent_automation_token_checks_total", verdict=verdict)] == 0


def test_a_server_expects_its_tools_buckets_and_sign_in_budget_at_0() -> None:
    metrics = Metrics()
    metrics.expect(["list_models", "create_agent_run"], DEFAULT_RATE_LIMITS, sign_in=True)
    exported = samples(metrics)
    for tool in ("list_models", "create_agent_run"):
        for outcome in ("ok", *SERVICE_SIDE_FAILURES):
            assert exported[sample("agent_automation_tool_calls_total", tool=tool, outcome=outcome)] == 0
        assert exported[sample("agent_automation_tool_call_duration_seconds_count", tool=tool)] == 0
    for bucket in DEFAULT_RATE_LIMITS:
        for status in UPSTREAM_STATUSES:
            assert exported[sample("agent_automation_upstream_requests_total", bucket=bucket, status=status)] == 0
    for endpoint in BUDGETED_SIGNIN:
        for status, reason in BUDGET_REFUSALS:
            key = sample("agent_automation_oauth_requests_total", endpoint=endpoint, status=status, reason=reason)
            assert exported[key] == 0
    without = Metrics()
    without.expect([], [], sign_in=False)  # no sign-in endpoints: none of their series
    assert not any(name == "agent_automation_oauth_requests_total" for name, _ in samples(without))


def test_a_first_refusal_moves_a_series_that_was_there_already() -> None:
    metrics = Metrics()
    metrics.expect([], [], sign_in=True)
    before = samples(metrics)
    metrics.signin_answered("register", 429, "rate_limited")
    after = samples(metrics)
    assert set(after) == set(before)  # no new series: rate() sees the step from 0 to 1
    assert after[sample("agent_automation_oauth_requests_total", endpoint="register", status="429",
                        reason="rate_limited")] == 1


def test_the_catalogue_holds_every_reason_the_gate_and_the_sign_in_budget_name() -> None:
    catalogued = set(REFUSALS)
    assert {(str(status), reason) for status, reason in access.REASONS.items()} <= catalogued
    assert {("401", "token_refused"), ("403", organizations.ORG_NOT_ALLOWED)} <= catalogued
    reasons = {reason for _, reason in REFUSALS}
    for path in REMOTE.glob("*.py"):  # reasons noted for /mcp requests (the sign-in's own are in oauth/)
        text = path.read_text()
        constants = dict(re.findall(r'^([A-Z_]+): Final = "(\w+)"', text, re.M))
        named = re.findall(r'note_reason\("(\w+)"\)', text) + [
            constants[name] for name in re.findall(r'note_reason\(([A-Z_]+)\)', text)]
        assert set(named) <= reasons, (path.name, named)
    endpoints = (REMOTE / "oauth" / "endpoints.py").read_text()
    budgeted = set(re.findall(r'_(?:budgeted|public)\("(\w+)"', endpoints))
    assert budgeted and budgeted | {"consent"} == set(BUDGETED_SIGNIN)  # consent: the POST of authorize's budget
    spent = set(re.findall(r'note_reason\("(rate_limited|unavailable)"\)', endpoints))
    assert spent == {reason for _, reason in BUDGET_REFUSALS}


def test_the_operations_guide_names_every_refusal_reason() -> None:
    guide = (REMOTE.parents[2] / "docs" / "operations.md").read_text()
    [row] = [line for line in guide.splitlines() if line.startswith("| `agent_automation_http_refused_total` |")]
    assert {reason for _, reason in REFUSALS} <= set(re.findall(r"`(\w+)`", row))


def test_the_operations_guide_lists_every_family_with_its_labels() -> None:
    """docs/operations.md's table of series is `FAMILIES` (remote/metrics.py, the families `Metrics` declares): a new
    family needs its row."""
    guide = (REMOTE.parents[2] / "docs" / "operations.md").read_text()
    rows = {name: set(re.findall(r"`(\w+)`", labels))
            for names, labels in re.findall(r"^\| (`agent_automation_.*?) \| (.*?) \|", guide, re.M)
            for name in re.findall(r"`(agent_automation_\w+)`", names)}
    declared = {family.name + ("_total" if family.kind is Counter else ""): set(family.labels)
                for family in FAMILIES.values()}
    differ = sorted(name for name, labels in declared.items() if rows.get(name) != labels)
    assert not differ, (f"docs/operations.md's table of series lacks {differ} (remote/metrics.py FAMILIES), or "
                        "names other labels: add or fix their rows")
    assert set(rows) <= set(declared), f"docs/operations.md lists series no family exports: {set(rows) - set(declared)}"
