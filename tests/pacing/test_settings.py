"""Pacing settings: the bucket map override and the environment variables."""

from __future__ import annotations

import pytest

from agent_automation_mcp.api.operations import parse_bucket_map
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.pacing import create_pacer


def test_the_default_bucket_map_is_the_operation_table() -> None:
    """No override by default: each operation spends the buckets of its table entry (tests/api/test_operations.py
    pins them to the published limits)."""
    assert ApiSettings().bucket_map == {}


def test_the_bucket_map_overrides_named_operations_only() -> None:
    assert parse_bucket_map(" get_agent_run_logs = logs , create_agent_run=agent_creation+standard+standard,") == {
        "get_agent_run_logs": ("logs",), "create_agent_run": ("agent_creation", "standard")}


@pytest.mark.parametrize(("spec", "problem"), [
    ("get_agent_run_logs", "expected operation=bucket"),
    ("get_agent_run_logs=", "expected operation=bucket"),
    ("get_run_logs=logs", "unknown operation"),
    ("get_agent_run_logs=log+standard", "unknown rate-limit bucket"),
])
def test_a_bad_bucket_map_is_refused(spec: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_bucket_map(spec)


def test_pacing_settings_come_from_the_environment() -> None:
    settings = ApiSettings.from_env({
        "AGENT_AUTOMATION_RATE_LIMITS": "standard=60/3s",
        "AGENT_AUTOMATION_RATE_MARGIN": "0.1",
        "AGENT_AUTOMATION_MAX_REPLICAS": "3",
        "AGENT_AUTOMATION_BUCKET_MAP": "get_agent_run_logs=logs",
        "AGENT_AUTOMATION_REDIS_URL": "redis://127.0.0.1:1/0",
    })
    assert (settings.rate_margin, settings.max_replicas) == (0.1, 3)
    assert settings.bucket_map == {"get_agent_run_logs": ("logs",)}
    assert str(settings.rate_limits["standard"]) == "60/3s"
    assert settings.redis_url == "redis://127.0.0.1:1/0"


def test_nonsense_pacing_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="margin"):
        create_pacer(ApiSettings(rate_margin=-1))
    with pytest.raises(ValueError, match="replica"):
        create_pacer(ApiSettings(max_replicas=0))
