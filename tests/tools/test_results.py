"""What a result tells a model is what the service said: counts, delivery, pull-request ids, timestamps' zone."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import parse_qs

import pytest
from sandboxed import connected

from catalogue import LONG_RUN

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


@pytest.mark.anyio
async def test_a_pull_request_shows_both_ids_and_is_found_by_its_url_or_short_form() -> None:
    async with connected() as (client, sandbox):
        run = await client.call_tool("get_agent_run", {"agent_run_id": RUN_WITH_PR})
        (pr,) = run.structured_content["pull_requests"]
        by_url = await client.call_tool("edit_pull_request", {"pr_url": pr["url"], "state": "ready_for_review"})
        short = f"SANDBOX-ORG/web-app#{pr['number']}"  # what a user says: the repository and the number
        by_short = await client.call_tool("edit_pull_request", {"pr_url": short, "state": "draft"})
        edits = [r.path for r in sandbox.request_log if r.operation == "edit_pull_request_simple"]
    assert {key: pr[key] for key in ("pr_id", "number", "url")} == {
        "pr_id": PR_ID, "number": 1, "url": "https://github.com/sandbox-org/web-app/pull/1"}
    assert f"pull request pr_id {PR_ID} (GitHub #1)" in run.content[0].text
    assert by_url.structured_content["pr_id"] == by_short.structured_content["pr_id"] == PR_ID
    assert by_short.structured_content["number"] == 1 and by_short.structured_content["state"] == "draft"
    assert by_short.content[0].text == (f"Pull request pr_id {PR_ID} (GitHub #1) is now draft (the service does not "
                                        "say what it was); "
                                        "its URL and title are in the result")
    assert edits == [f"/v1/organizations/{sandbox.org_id}/prs/{PR_ID}"] * 2


@pytest.mark.anyio
async def test_a_pull_request_that_cannot_be_found_says_where_a_pr_id_comes_from() -> None:
    async with connected() as (client, sandbox):
        unknown = await client.call_tool("edit_pull_request", {"pr_url": "sandbox-org/web-app#77", "state": "open"})
        wrong_id = await client.call_tool("edit_pull_request", {"pr_id": 7, "state": "ready_for_review"})
        neither = await client.call_tool("edit_pull_request", {"state": "open"})
        not_a_pr = await client.call_tool("edit_pull_request", {"pr_url": "https://github.com/pull/1", "state": "open"})
        edits = [r for r in sandbox.request_log if r.operation == "edit_pull_request_simple"]
    assert unknown.structured_content["error"]["kind"] == "not_found" and len(edits) == 1  # only wrong_id was sent
    assert "agent runs" in unknown.structured_content["error"]["message"]
    hint = wrong_id.structured_content["error"]["hint"]
    assert "not the GitHub number" in hint and "get_agent_run" in hint and "list the resources" not in hint
    assert neither.structured_content["error"]["kind"] == not_a_pr.structured_content["error"]["kind"] == \
        "invalid_arguments"
