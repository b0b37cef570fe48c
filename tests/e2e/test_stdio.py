"""The server as MCP hosts run it: `python -m agent_automation_mcp` over stdio, in both protocol eras."""

from __future__ import annotations

import anyio
import pytest
from harness import MODES, clean_env, error_of, sandbox_env, stdio_server, thirty_waiting_calls
from mcp import Client, MCPError
from scenario import check_every_tool

from agent_automation_mcp.sandbox import SandboxServer
from catalogue import CASES, LONG_RUN, REPO_ID, catalogue_gap


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_every_tool(sandbox: SandboxServer, mode: str) -> None:
    async with Client(stdio_server(sandbox_env(sandbox, AGENT_AUTOMATION_TOOLSETS="all")), mode=mode) as client:
        await check_every_tool(client, mode)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_progress_while_waiting_and_paging(sandbox: SandboxServer, mode: str) -> None:
    waits: list[tuple[float, float | None, str | None]] = []
    pages: list[tuple[float, float | None, str | None]] = []

    async def on_wait(progress: float, total: float | None, message: str | None) -> None:
        waits.append((progress, total, message))

    async def on_page(progress: float, total: float | None, message: str | None) -> None:
        pages.append((progress, total, message))

    async with Client(stdio_server(sandbox_env(sandbox)), mode=mode) as client:
        run = await client.call_tool("create_agent_run", {"prompt": "Wait for me", "repo_id": REPO_ID})
        run_id = run.structured_content["id"]
        done = await client.call_tool("get_agent_run", {"agent_run_id": run_id, "wait_seconds": 20},
                                      progress_callback=on_wait)
        trace = await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN, "limit": 50,
                                                              "all_pages": True}, progress_callback=on_page)
        page = trace.structured_content
        entries = list(page["entries"])
        for _ in range(5):  # a call returns a bounded amount; next_skip says where the next one goes on
            if page["next_skip"] is None:
                break
            page = (await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN, "all_pages": True,
                                                                  "skip": page["next_skip"]})).structured_content
            entries += page["entries"]
        with anyio.move_on_after(10):  # notifications may trail the result on a real transport (a while, when busy)
            while not waits or len(pages) < 3:
                await anyio.sleep(0.05)
    assert done.structured_content["is_terminal"] and done.structured_content["waited_seconds"] > 0
    assert waits and all(total == 20 for _, total, _ in waits) and f"run {run_id}" in str(waits[0][2])
    assert [p for p, _, _ in waits] == sorted(p for p, _, _ in waits)
    assert page["next_skip"] is None and len(entries) == page["total_logs"]
    assert [p for p, _, _ in pages] == [50, 100, 150, 200][: len(pages)] and len(pages) >= 3
    assert all(total == page["total_logs"] for _, total, _ in pages)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_error_shapes(sandbox: SandboxServer, mode: str) -> None:
    async with Client(stdio_server(sandbox_env(sandbox)), mode=mode) as client:
        missing = error_of(await client.call_tool("get_agent_run", {"agent_run_id": 987654}))
        assert (missing["kind"], missing["status"]) == ("not_found", 404)
        invalid = error_of(await client.call_tool("get_agent_run_logs", {"agent_run_id": 1, "limit": 500}))
        assert invalid["kind"] == "invalid_arguments" and invalid["details"][0]["loc"] == ["limit"]
        wrong_type = error_of(await client.call_tool("list_agent_runs", {"skip": "lots"}))
        assert wrong_type["kind"] == "invalid_arguments"
        boolean = error_of(await client.call_tool("get_agent_run", {"agent_run_id": True}))
        assert boolean["kind"] == "invalid_arguments" and boolean["details"][0]["loc"] == ["agent_run_id"]
        creates = sum(r.operation == "create_agent_run" for r in sandbox.request_log)
        misspelt = error_of(await client.call_tool("create_agent_run", {"prompt": "x", "repository_id": 201}))
        assert misspelt["kind"] == "invalid_arguments" and misspelt["details"][0]["loc"] == ["repository_id"]
        assert "repo_id" in misspelt["message"]
        assert sum(r.operation == "create_agent_run" for r in sandbox.request_log) == creates  # nothing was sent
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("delete_everything", {})
        assert unknown.value.error.code == -32602


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_read_only_ceiling_and_toolsets_hold_at_list_and_call_time(sandbox: SandboxServer, mode: str) -> None:
    env = sandbox_env(sandbox, AGENT_AUTOMATION_READ_ONLY="1")
    async with Client(stdio_server(env, "--toolsets", "runs,logs,oauth"), mode=mode) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        offered = [c for c in CASES if c.toolset in ("runs", "logs", "oauth") and c.read_only]
        assert not (gap := catalogue_gap(sorted(listed), offered, ordered=False)), gap
        assert listed >= {"get_agent_run_logs", "get_oauth_token_status"}
        assert client.instructions and "get_agent_run_logs" in client.instructions
        assert "create_agent_run" not in client.instructions  # the guide names only tools on offer
        for case in CASES:  # the rest are refused as unknown, before anything is sent
            if case not in offered:
                with pytest.raises(MCPError) as caught:
                    await client.call_tool(case.name, case.call)
                assert caught.value.error.code == -32602, case.name
        assert not (await client.call_tool("list_agent_runs", {"limit": 1})).is_error


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_without_a_token_tools_are_listed_and_calls_say_how_to_set_it(mode: str) -> None:
    async with Client(stdio_server(clean_env()), mode=mode) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        assert not (gap := catalogue_gap(listed, [c for c in CASES if c.default])), gap
        error = error_of(await client.call_tool("list_repositories", {}))
    assert error["kind"] == "configuration" and error["status"] is None
    assert "AGENT_AUTOMATION_API_TOKEN" in error["hint"] and "--sandbox" in error["hint"]


@pytest.mark.anyio
async def test_the_only_organisation_is_used_when_none_is_configured(sandbox: SandboxServer) -> None:
    async with Client(stdio_server(sandbox_env(sandbox, AGENT_AUTOMATION_ORG_ID=None))) as client:
        result = await client.call_tool("list_repositories", {"limit": 1})
    assert not result.is_error and result.structured_content["repositories"][0]["id"] == REPO_ID


@pytest.mark.anyio
async def test_thirty_parallel_calls_of_the_one_local_user_are_never_capped(sandbox: SandboxServer) -> None:
    """The per-tenant cap shares a server among tenants; over stdio there is one user, and no call is refused."""
    async with Client(stdio_server(sandbox_env(sandbox))) as client:
        run = await client.call_tool("create_agent_run", {"prompt": "Keep thirty callers busy", "repo_id": REPO_ID})
        calls = await thirty_waiting_calls(client, run.structured_content["id"])
    refused = [call for call in calls if call.is_error]
    assert len(calls) == 30 and not refused, error_of(refused[0])
