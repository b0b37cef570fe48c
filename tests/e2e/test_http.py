"""The Streamable HTTP transport (`--transport http`, a subprocess per module), in both protocol eras."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from harness import MODES, HttpServer, clean_env, error_of, thirty_waiting_calls
from mcp import Client, MCPError
from mcp.client.session import ClientRequestContext
from mcp.types import ElicitRequestParams, ElicitResult
from scenario import LONG_RUN, check_every_tool


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_every_tool(http_server: HttpServer, mode: str) -> None:
    async with Client(http_server.url, mode=mode) as client:
        await check_every_tool(client, mode)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_progress_and_errors(http_server: HttpServer, mode: str) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with Client(http_server.url, mode=mode) as client:
        trace = await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN, "limit": 100,
                                                              "all_pages": True}, progress_callback=on_progress)
        await anyio.sleep(0.1)
        assert not trace.is_error and trace.structured_content["read"] >= 200
        assert seen[:2] == [100, 200]
        forbidden = error_of(await client.call_tool("ban_checks", {"agent_run_id": 987654}))
        assert forbidden["status"] == 404 and forbidden["kind"] == "not_found"
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("no_such_tool", {})
        assert unknown.value.error.code == -32602


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_without_a_token_and_read_only_over_http(mode: str) -> None:
    server = HttpServer(clean_env(AGENT_AUTOMATION_READ_ONLY="1"))
    try:
        async with Client(server.url, mode=mode) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            error = error_of(await client.call_tool("list_repositories", {}))
            with pytest.raises(MCPError) as hidden:
                await client.call_tool("create_agent_run", {"prompt": "x"})
    finally:
        server.stop()
    assert "get_agent_run" in listed and "create_agent_run" not in listed
    assert error["kind"] == "configuration" and "AGENT_AUTOMATION_API_TOKEN" in error["hint"]
    assert hidden.value.error.code == -32602


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_destructive_tool_asks_the_user_over_http(http_server: HttpServer, mode: str) -> None:
    asked: list[str] = []

    def answering(action: str) -> Any:
        async def user(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
            asked.append(params.message)
            return ElicitResult(action=action, content={"confirm": True} if action == "accept" else None)  # type: ignore[arg-type]
        return user

    async with Client(http_server.url, mode=mode, elicitation_callback=answering("decline")) as client:
        first = await client.call_tool("delete_webhook", {})
    async with Client(http_server.url, mode=mode, elicitation_callback=answering("accept")) as client:
        accepted = await client.call_tool("delete_webhook", {})
    assert not accepted.is_error
    if mode == "legacy":
        # Served statelessly (any replica answers any request), a 2025-11-25 session leaves no record of the
        # capabilities its initialize declared, and a question mid-call would need the session: not asked.
        assert not first.is_error and asked == []
        return
    assert error_of(first)["kind"] == "cancelled"
    assert len(asked) == 2 and all("webhook" in question for question in asked)


@pytest.mark.anyio
async def test_thirty_parallel_calls_with_the_servers_own_token_are_never_capped(http_server: HttpServer) -> None:
    """`--auth env` (the default on loopback) serves the one configured user: the per-tenant cap is not theirs."""
    async with Client(http_server.url) as client:
        run = await client.call_tool("create_agent_run", {"prompt": "Keep thirty callers busy"})
        calls = await thirty_waiting_calls(client, run.structured_content["id"])
    refused = [call for call in calls if call.is_error]
    assert len(calls) == 30 and not refused, error_of(refused[0])


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_prompts_over_http(http_server: HttpServer, mode: str) -> None:
    async with Client(http_server.url, mode=mode) as client:
        listed = [prompt.name for prompt in (await client.list_prompts()).prompts]
        fetched = await client.get_prompt("explain_run_failure", {"agent_run_id": str(LONG_RUN)})
        with pytest.raises(MCPError) as refused:
            await client.get_prompt("explain_run_failure", {"agent_run_id": "-1"})
    assert listed == ["delegate_task", "runs_status", "explain_run_failure", "pull_request_runs"]
    assert f"get_agent_run with agent_run_id {LONG_RUN}" in fetched.messages[0].content.text
    assert refused.value.error.code == -32602 and "agent_run_id" in refused.value.error.message
