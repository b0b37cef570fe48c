"""The one error shape, argument refusal before any request, and the filters at call time (in memory)."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from mcp import Client, MCPError
from sandboxed import connected

from agent_automation_mcp.api.client import AgentAutomationClient
from agent_automation_mcp.api.errors import ConfigurationError, NotFoundError, RateLimitError, ValidationFailedError
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.server import build_server
from agent_automation_mcp.tools.errors import ID_HINTS, NOT_FOUND_HINT, error_result, not_found_hint
from agent_automation_mcp.tools.registry import TOOLSETS
from catalogue import CASES, calls, catalogue_gap

SECRET = "tok-never-shown-0123456789"

ARGUMENTS = calls()  # a valid call of each tool

def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def _assert_error_shape(result: Any, kind: str) -> dict[str, Any]:
    assert result.is_error
    error = result.structured_content["error"]
    assert error["kind"] == kind
    assert set(error) <= {"kind", "status", "message", "retry_after_seconds", "details", "hint"}
    assert {"kind", "status", "message", "hint"} <= set(error)
    assert len(result.content) == 1 and "\n" not in result.content[0].text
    assert kind in result.content[0].text
    return error


@pytest.mark.anyio
async def test_without_a_token_every_tool_says_how_to_set_it() -> None:
    server = build_server(ApiSettings(token=None), ServerSettings(toolsets=TOOLSETS))
    async with Client(server) as client:
        assert not (gap := catalogue_gap([tool.name for tool in (await client.list_tools()).tools])), gap
        for name, arguments in ARGUMENTS.items():
            error = _assert_error_shape(await client.call_tool(name, arguments), "configuration")
            assert "AGENT_AUTOMATION_API_TOKEN" in error["hint"] and "--sandbox" in error["hint"], name


@pytest.mark.anyio
@pytest.mark.parametrize(("name", "arguments", "field"), [
    ("get_agent_run", {"agent_run_id": 0}, "agent_run_id"),
    ("get_agent_run", {"agent_run_id": 1, "wait_seconds": 51}, "wait_seconds"),
    ("get_agent_run_logs", {"agent_run_id": 1, "limit": 101}, "limit"),
    ("get_agent_run_logs", {"agent_run_id": 1, "message_types": ["NO PE"]}, "message_types"),
    ("create_agent_run", {"prompt": "   "}, "prompt"),
    ("create_agent_run", {}, "prompt"),
    ("edit_pull_request", {"pr_id": 1, "state": "merged"}, "state"),
    ("update_check_suite_settings", {"repo_id": 1, "check_retry_count": 11}, "check_retry_count"),
    ("set_webhook", {"url": "ftp://x"}, "url"),
    ("get_agent_run", {"agent_run_id": True}, "agent_run_id"),
    ("create_agent_run", {"prompt": "x", "repository_id": 5}, "repository_id"),  # misspelt: never dropped silently
    # Ids are decimal digits within int64, nothing a lax parser would guess at.
    ("get_agent_run", {"agent_run_id": "4_2"}, "agent_run_id"),
    ("get_agent_run", {"agent_run_id": " 42 "}, "agent_run_id"),
    ("get_agent_run", {"agent_run_id": 42.0}, "agent_run_id"),
    ("get_agent_run", {"agent_run_id": 10**30}, "agent_run_id"),
    ("get_agent_run", {"agent_run_id": 2**63}, "agent_run_id"),
    ("list_agent_runs", {"skip": "1e3"}, "skip"),
    # Every string and list has a bound, so nothing oversized is forwarded.
    ("update_check_suite_settings", {"repo_id": 1, "ignored_checks": ["lint"] * 200_000}, "ignored_checks"),
    ("update_check_suite_settings", {"repo_id": 1, "custom_prompts": {"lint": "x" * 1_000_000}}, "custom_prompts"),
    ("update_check_suite_settings", {"repo_id": 1, "high_priority_apps": ["x" * 201]}, "high_priority_apps"),
    ("get_agent_run_logs", {"agent_run_id": 1, "message_types": ["ERROR"] * 21}, "message_types"),
])
async def test_invalid_arguments_are_refused_before_any_request(name: str, arguments: dict[str, Any],
                                                                 field: str) -> None:
    # A token and an unreachable service: a request would show up as a connection error instead.
    server = build_server(ApiSettings(token=SECRET, org_id=1, base_url=_closed_port_url()),
                          ServerSettings(toolsets=TOOLSETS))
    async with Client(server) as client:
        error = _assert_error_shape(await client.call_tool(name, arguments), "invalid_arguments")
    assert error["status"] is None
    assert any(detail["loc"][0] == field for detail in error["details"])
    assert "nothing was sent" in error["hint"].lower()


@pytest.mark.anyio
@pytest.mark.parametrize("run_id", ["42", 42, 2**63 - 1])
async def test_an_id_in_decimal_digits_is_sent_quoted_or_not(run_id: int | str) -> None:
    server = build_server(ApiSettings(token=SECRET, org_id=1, base_url=_closed_port_url()), ServerSettings())
    async with Client(server) as client:
        _assert_error_shape(await client.call_tool("get_agent_run", {"agent_run_id": run_id}), "connection")


def test_every_string_and_list_argument_has_a_bound() -> None:
    def unbounded(schema: Any, where: str) -> list[str]:
        if isinstance(schema, list):
            return [w for i, item in enumerate(schema) for w in unbounded(item, f"{where}[{i}]")]
        if not isinstance(schema, dict):
            return []
        found = []
        types = schema.get("type") if isinstance(schema.get("type"), list) else [schema.get("type")]
        bounded = {"string": ("maxLength", "enum", "const"), "array": ("maxItems",), "object": ("maxProperties",)}
        for kind, keys in bounded.items():
            if kind in types and not any(key in schema for key in keys) and where.count(".") > 1:
                found.append(where)
        return found + [w for key, value in schema.items() for w in unbounded(value, f"{where}.{key}")]

    server = build_server(ApiSettings(), ServerSettings(toolsets=TOOLSETS))
    parameters = {tool.name: tool.parameters for tool in server._tool_manager.list_tools()}
    for case in CASES:
        assert unbounded(parameters[case.name], case.name) == [], case.name


@pytest.mark.anyio
@pytest.mark.parametrize(("name", "arguments", "kind"), [
    ("update_check_suite_settings", {"repo_id": 1}, "invalid_arguments"),  # no setting given: the client refuses
    ("get_agent_run", {"agent_run_id": 5}, "connection"),  # nothing listens on the port
])
async def test_errors_before_or_without_an_answer_keep_the_token_out(name: str, arguments: dict[str, Any],
                                                                     kind: str) -> None:
    server = build_server(ApiSettings(token=SECRET, org_id=1, base_url=_closed_port_url()), ServerSettings())
    async with Client(server) as client:
        result = await client.call_tool(name, arguments)
    _assert_error_shape(result, kind)
    assert SECRET not in str(result.model_dump())


@pytest.mark.anyio
async def test_a_fault_inside_the_server_comes_back_in_the_same_shape(monkeypatch: pytest.MonkeyPatch,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    async def broken(self: AgentAutomationClient) -> None:
        raise KeyError(SECRET)  # stands in for a bug; its message may quote anything, the token included

    monkeypatch.setattr(AgentAutomationClient, "list_models", broken)
    server = build_server(ApiSettings(token=SECRET, org_id=1, base_url=_closed_port_url()), ServerSettings())
    async with Client(server) as client:
        result = await client.call_tool("list_models", {})
    error = _assert_error_shape(result, "internal_error")
    assert "KeyError" in error["message"] and "stderr" in error["hint"]
    assert SECRET not in str(result.model_dump())
    assert "list_models failed inside the server (KeyError)" in caplog.text and "broken" in caplog.text
    assert SECRET not in caplog.text


@pytest.mark.anyio
async def test_unknown_and_filtered_tools_are_protocol_errors() -> None:
    server = build_server(ApiSettings(token=SECRET, org_id=1), ServerSettings(toolsets=("runs", "oauth"),
                                                                              read_only=True))
    async with Client(server) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        offered = [c for c in CASES if c.toolset in ("runs", "oauth") and c.read_only]
        assert not (gap := catalogue_gap(sorted(listed), offered, ordered=False)), gap
        for name in ["no_such_tool", *(case.name for case in CASES if case.name not in listed)]:
            with pytest.raises(MCPError) as caught:
                await client.call_tool(name, ARGUMENTS.get(name, {}))
            assert caught.value.error.code == -32602
            assert name in caught.value.error.message


def test_error_result_carries_retry_after_details_and_one_line() -> None:
    result = error_result(RateLimitError("rate limit exceeded", status=429, retry_after=2.01))
    error = result.structured_content["error"]
    assert error["retry_after_seconds"] == 2.1 and error["status"] == 429
    assert result.content[0].text == ("Error [rate_limited] (HTTP 429): rate limit exceeded. Retry after 2.1 s. "
                                      "Wait retry_after_seconds, then call again.")
    details = [{"loc": ["body", "prompt"], "msg": "Field required", "type": "missing"}]
    error = error_result(ValidationFailedError("prompt: Field required", status=422, details=details))
    assert error.structured_content["error"]["details"] == details
    not_found = error_result(NotFoundError("Agent run 9 not found", status=404)).structured_content["error"]
    assert "retry_after_seconds" not in not_found and "details" not in not_found
    listed = error_result(ConfigurationError("this API token sees 2 organisations: 1 (a), 2 (b)"))
    assert listed.structured_content["error"]["status"] is None


# Each tool whose valid call names an id that something lists (`ID_HINTS`), with that id made unknown.
UNKNOWN_IDS = [(case.name, name) for case in CASES for name in case.call if name in ID_HINTS]


@pytest.mark.anyio
async def test_a_not_found_says_what_lists_the_id_that_was_not_found() -> None:
    """A 404's hint is derived from the ids the operation takes (`not_found_hint`): a new tool's unknown id gets its
    hint with no entry to write. Every tool of the catalogue whose call names such an id, called with it unknown."""
    assert {name for _, name in UNKNOWN_IDS} >= {"agent_run_id", "repo_id", "sandbox_id"}
    async with connected(toolsets=TOOLSETS) as (client, _):
        for tool, name in UNKNOWN_IDS:
            result = await client.call_tool(tool, {**ARGUMENTS[tool], name: 999_999})
            error = _assert_error_shape(result, "not_found")
            assert error["hint"].startswith(ID_HINTS[name]), (tool, name, error["hint"])
    assert not_found_hint("get_user") == ID_HINTS["user_id"] and not_found_hint("list_models") == NOT_FOUND_HINT
