"""The Streamable HTTP transport (`--transport http`, a subprocess per module), in both protocol eras."""

from __future__ import annotations

import anyio
import pytest
from harness import MODES, HttpServer, error_of
from mcp import Client, MCPError
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
