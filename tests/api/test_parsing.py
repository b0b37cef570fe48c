"""Lenient on what comes in, strict on what goes out; settings from either family of variable names."""

from __future__ import annotations

import email.utils
import time

import pytest

from agent_automation_mcp.api import Credentials
from agent_automation_mcp.api.models import AgentRun, Integrations, LogPage, Repository, User
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.api.statuses import is_finished
from agent_automation_mcp.api.transport import parse_retry_after


@pytest.mark.parametrize(
    ("status", "terminal"),
    [("COMPLETE", True), ("completed", True), ("FAILED", True), ("ERROR", True), ("CANCELLED", True),
     ("STOPPED", True), ("ACTIVE", False), ("PENDING", False), ("RUNNING", False), ("paused", False),
     ("SOMETHING_NEW", False), (None, False), (" Complete ", True), ("TIMEOUT", True), ("max_iterations_reached", True),
     ("OUT_OF_TOKENS", True), ("EVALUATION", False), ("PAUSED", False)],
)
def test_run_status_is_an_open_string_with_a_case_insensitive_terminal_flag(status: str | None,
                                                                             terminal: bool) -> None:
    run = AgentRun.model_validate({"id": 1, "organization_id": 2, "status": status})
    assert run.status == status
    assert run.is_terminal is terminal is is_finished(status)
    assert run.model_dump()["is_terminal"] is terminal


def test_run_keeps_unknown_fields_string_ids_and_odd_timestamps() -> None:
    run = AgentRun.model_validate({"id": "42", "organization_id": "7", "created_at": "2025-06-21 11:20:04.338398",
                                   "brand_new_field": {"x": 1}, "github_pull_requests": [
                                       {"id": "9", "created_at": "2025-06-21T11:20:04Z", "extra": True}]})
    assert (run.id, run.organization_id) == (42, 7)
    assert run.created_at == "2025-06-21 11:20:04.338398"
    assert run.model_extra == {"brand_new_field": {"x": 1}}
    assert run.github_pull_requests and run.github_pull_requests[0].id == 9


def test_log_fields_accept_objects_strings_and_null_and_unknown_message_types() -> None:
    page = LogPage.model_validate({"id": 1, "organization_id": 1, "logs": [
        {"agent_run_id": 1, "message_type": "ACTION", "tool_name": "grep", "tool_input": {"q": "x"},
         "tool_output": "plain text output", "observation": None},
        {"agent_run_id": 1, "message_type": "FINAL_ANSWER", "observation": "done"},
        {"agent_run_id": 1, "message_type": "ERROR", "observation": {"error": "boom"}},
        {"agent_run_id": 1, "message_type": "A_TYPE_FROM_THE_FUTURE", "tool_output": [1, 2]},
    ], "total_logs": 4})
    assert [entry.message_type for entry in page.logs][-1] == "A_TYPE_FROM_THE_FUTURE"
    assert page.logs[0].tool_output == "plain text output"
    assert page.logs[2].observation == {"error": "boom"}


def test_integration_ids_may_arrive_as_strings() -> None:
    entry = {"integration_type": "slack", "active": True, "token_id": "abc-123", "installation_id": 5}
    parsed = Integrations.model_validate({"organization_id": 1, "organization_name": "x",
                                         "total_active_integrations": 1, "integrations": [entry]})
    assert parsed.integrations[0].token_id == "abc-123"


def test_numbers_where_the_spec_says_string_are_taken_as_text() -> None:
    user = User.model_validate({"id": 3, "github_user_id": 583231, "github_username": "octocat"})
    repo = Repository.model_validate({"id": 4, "name": "web", "github_id": 1296269, "organization_id": 1})
    assert (user.github_user_id, repo.github_id) == ("583231", "1296269")


@pytest.mark.parametrize("token", ["“pasted-with-smart-quotes”", "tab\there", "new\nline", "with space", ""])
def test_a_token_that_cannot_go_in_a_header_is_refused_without_being_quoted(token: str) -> None:
    with pytest.raises(ValueError) as refused:
        Credentials(token, 1)
    assert not token or token not in str(refused.value)


def test_retry_after_in_seconds_or_http_date() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("1.5") == 1.5
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("-3") == 0.0
    in_ten = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert 8.0 <= (parse_retry_after(in_ten) or 0) <= 10.5


def test_token_never_shows_in_repr() -> None:
    creds = Credentials("super-secret-token-value", 3)
    assert "super-secret" not in repr(creds)
    assert "super-secret" not in creds.token_key
    assert "super-secret" not in repr(ApiSettings(token="super-secret-token-value"))


def test_settings_prefer_our_names_and_fall_back_to_the_services_own() -> None:
    ours = ApiSettings.from_env({"AGENT_AUTOMATION_API_TOKEN": "a", "CODEGEN_API_KEY": "b",
                                 "AGENT_AUTOMATION_ORG_ID": "5", "CODEGEN_ORG_ID": "6",
                                 "AGENT_AUTOMATION_BASE_URL": "http://127.0.0.1:1/", "CODEGEN_API_BASE_URL": "x"})
    assert (ours.token, ours.org_id, ours.base_url) == ("a", 5, "http://127.0.0.1:1")
    theirs = ApiSettings.from_env({"CODEGEN_API_TOKEN": "c", "CODEGEN_ORG_ID": "6",
                                   "CODEGEN_API_BASE_URL": "http://127.0.0.1:2"})
    assert (theirs.token, theirs.org_id, theirs.base_url) == ("c", 6, "http://127.0.0.1:2")
    assert ApiSettings.from_env({"CODEGEN_API_KEY": "k"}).token == "k"
    assert ApiSettings.from_env({}).base_url == "https://api.codegen.com"
    with pytest.raises(ValueError, match="positive integer"):
        ApiSettings.from_env({"AGENT_AUTOMATION_ORG_ID": "abc"})
