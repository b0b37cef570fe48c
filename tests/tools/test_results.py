"""What a result tells a model is what the service said: counts, delivery, pull-request ids, timestamps' zone."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import parse_qs

import pytest
from sandboxed import LONG_RUN, connected

RUN_WITH_PR, PR_ID = 401, 301  # the sandbox's finished run with an open pull request on sandbox-org/web-app


def _utc(value: str) -> bool:
    return datetime.fromisoformat(value).utcoffset() is not None and value.endswith("+00:00")


@pytest.mark.anyio
async def test_timestamps_without_a_zone_come_back_as_utc_with_the_offset_said() -> None:
    async with connected() as (client, _):
        run = (await client.call_tool("get_agent_run", {"agent_run_id": RUN_WITH_PR})).structured_content
        trace = (await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN, "limit": 5}))
    assert " " not in run["created_at"] and _utc(run["created_at"])  # the sandbox sends `2025-06-21 11:20:04.3`
    assert all(_utc(entry["created_at"]) for entry in trace.structured_content["entries"])


@pytest.mark.anyio
async def test_revoking_says_how_many_the_service_revoked_and_none_when_none() -> None:
    async with connected(toolsets=("oauth",)) as (client, sandbox):
        first = await client.call_tool("revoke_oauth_tokens", {"provider": "Linear"})  # the service spells it linear
        again = await client.call_tool("revoke_oauth_tokens", {"provider": "LINEAR"})
        sent = [parse_qs(r.query)["provider"] for r in sandbox.request_log if r.operation == "revoke_oauth_tokens"]
    assert first.structured_content["revoked"] == 1 and first.structured_content["provider"] == "linear"
    assert first.content[0].text.startswith("Revoked 1 of the user's Linear OAuth token")
    assert again.structured_content["revoked"] == 0 and again.content[0].text.startswith("Revoked none")
    assert sent == [["linear"], ["linear"]]


@pytest.mark.anyio
async def test_an_unknown_provider_is_refused_with_the_known_ones_and_nothing_is_revoked() -> None:
    async with connected(toolsets=("oauth",)) as (client, sandbox):
        result = await client.call_tool("revoke_oauth_tokens", {"provider": "gitlab"})
        revokes = [r for r in sandbox.request_log if r.operation == "revoke_oauth_tokens"]
    error = result.structured_content["error"]
    assert result.is_error and error["kind"] == "invalid_arguments" and not revokes
    assert error["details"]["providers"] == ["github", "linear", "slack"]
    assert "known providers: github, linear, slack" in error["message"]


@pytest.mark.anyio
async def test_test_webhook_reports_what_the_service_reports() -> None:
    async with connected(toolsets=("webhooks",)) as (client, _):
        answered = await client.call_tool("test_webhook", {"url": "https://example.com/hooks"})
        failed = await client.call_tool("test_webhook", {"url": "https://hooks.example.invalid/runs"})
    assert answered.structured_content["delivered"] is True and "succeeded" in answered.content[0].text
    assert failed.structured_content["delivered"] is False and "failed" in failed.content[0].text
    assert failed.structured_content["response"]["success"] is False
    assert "example" not in answered.content[0].text + failed.content[0].text  # the URL stays out of the prose
