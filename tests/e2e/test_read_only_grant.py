"""A read-only sign-in: what a person grants a chat app that cannot be asked to confirm (legacy-era HTTP clients,
served statelessly) when they do not want it to act. The consent page offers it; the grant's tools list holds no
tool that writes, and a call of one past the list is refused `insufficient_scope` before it runs."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest
from harness import MODES, RATE_LIMITS, HttpServer, clean_env, free_port, tenant_client
from oauth_flow import RawFlow, pkce, query_of
from test_context_per_request import assert_names_only_what_is_offered, told

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer

ALICE = "tok-alice-reads"
LEGACY_CALL = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "delete_webhook", "arguments": {}}}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(tokens=(ALICE,), rate_limits=parse_rate_limits(RATE_LIMITS))) as server:
        yield server


@pytest.fixture(scope="module")
def server(sandbox: SandboxServer) -> Iterator[HttpServer]:
    port = free_port()
    server = HttpServer(clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS,
                                  AGENT_AUTOMATION_TOOLSETS="all"),
                        "--auth", "oauth", "--public-url", f"http://127.0.0.1:{port}", port=port)
    yield server
    server.stop()


def signed_in(flow: RawFlow, **choice: str) -> dict[str, str]:
    client_id = flow.register()
    verifier, challenge = pkce()
    page = flow.consent_page(client_id, challenge)
    assert 'name="access" value="read"' in page.text  # the page offers reading only
    answer = flow.approve(page, ALICE, **choice)
    assert answer.status_code == 303, answer.text
    tokens = flow.exchange(client_id, query_of(answer.headers["location"])["code"], verifier)
    assert tokens.status_code == 200, tokens.text
    return tokens.json()


@pytest.mark.anyio
async def test_a_read_only_grant_lists_no_writes_and_a_call_past_the_list_is_insufficient_scope(
        server: HttpServer) -> None:
    reader = signed_in(RawFlow(server.origin), access="read")
    assert reader["scope"] == "read-only"
    bearer = f"Bearer {reader['access_token']}"
    async with tenant_client(server.url, "legacy", authorization=bearer) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert not (await client.call_tool("list_models", {})).is_error
    assert listed and all(tool.annotations.read_only_hint for tool in listed.values())
    assert "delete_webhook" not in listed
    refused = httpx2.post(server.url, json=LEGACY_CALL, timeout=30, headers={
        "authorization": bearer, "accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"})
    assert refused.status_code == 403
    assert refused.headers["www-authenticate"].endswith('error="insufficient_scope"')
    shown = await refusal_shown_for_call(server.url, bearer)
    assert "granted reading only" in shown
    assert "delete_webhook changes things" in shown and "Delete_webhook" not in shown  # a tool's name as it is spelt
    counted = httpx2.get(f"{server.origin}/metrics", timeout=10).text  # counted as what it is, not an origin's
    assert 'agent_automation_http_refused_total{reason="insufficient_scope",status="403"} 2.0' in counted


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_read_only_grant_is_told_of_no_tool_that_writes(server: HttpServer, mode: str) -> None:
    """Instructions, descriptions and prompts name only what the grant lists: no run to start, no prompt that
    starts one, and the organisation chosen at sign-in."""
    reader = signed_in(RawFlow(server.origin), access="read")
    async with tenant_client(server.url, mode, authorization=f"Bearer {reader['access_token']}") as client:
        seen = await told(client)
    assert_names_only_what_is_offered(seen)
    assert "create_agent_run" not in seen["instructions"] and "delegate_task" in seen["refused"]
    assert "Read-only for this connection" in seen["instructions"]
    assert 'This connection acts in organisation 1 ("Sandbox Org")' in seen["instructions"]


async def refusal_shown_for_call(url: str, bearer: str) -> str:
    async with tenant_client(url, "legacy", authorization=bearer) as client:
        try:
            await client.call_tool("delete_webhook", {})
        except Exception as exc:  # the SDK's MCPError, with the refusal's message
            return str(exc)
    raise AssertionError("the call was not refused")


@pytest.mark.anyio
async def test_a_full_grant_still_lists_and_calls_what_writes(server: HttpServer) -> None:
    writer = signed_in(RawFlow(server.origin))
    async with tenant_client(server.url, "legacy", authorization=f"Bearer {writer['access_token']}") as client:
        assert "delete_webhook" in {tool.name for tool in (await client.list_tools()).tools}
        assert not (await client.call_tool("delete_webhook", {})).is_error


def test_a_legacy_request_cannot_name_a_read_in_its_headers_and_write_in_its_body(server: HttpServer,
                                                                                  sandbox: SandboxServer) -> None:
    """The SDK checks `Mcp-Method`/`Mcp-Name` against the body in the 2026-07-28 era only: a 2025-11-25 request's
    headers are the client's word, and the gate once took it over the body."""
    reader = signed_in(RawFlow(server.origin), access="read")
    before = len([r for r in sandbox.request_log if r.operation == "delete_webhook"])
    lying = httpx2.post(server.url, json=LEGACY_CALL, timeout=30, headers={
        "authorization": f"Bearer {reader['access_token']}", "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25", "mcp-method": "tools/call", "mcp-name": "list_models"})
    assert lying.status_code == 403 and "granted reading only" in lying.json()["error"]["message"]
    assert len([r for r in sandbox.request_log if r.operation == "delete_webhook"]) == before
