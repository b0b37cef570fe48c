"""The MCP SDK's private attributes this server relies on (all in `sdk_seams.py`) are still where they were.

An SDK upgrade that moves them fails here, naming the attribute, instead of as a confusing failure in the
listing or capability tests.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.server import MCPServer
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel

from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.sdk_seams import (
    drop_methods,
    instructions_per_request,
    lowlevel,
    serve_get_prompt,
    serve_list_prompts,
    serve_list_tools,
    tool_with_output,
)
from agent_automation_mcp.server import build_server
from catalogue import CASES

SDK = f"mcp {importlib.metadata.version('mcp')}"


def test_the_low_level_server_and_its_handler_table_are_where_the_seams_look() -> None:
    server = MCPServer("seams")
    assert isinstance(getattr(server, "_lowlevel_server", None), Server), \
        f"{SDK}: MCPServer._lowlevel_server moved; update sdk_seams.lowlevel"
    handlers = getattr(lowlevel(server), "_request_handlers", None)
    assert isinstance(handlers, dict) and {"tools/list", "resources/list", "prompts/list"} <= set(handlers), \
        f"{SDK}: Server._request_handlers moved or changed shape; update sdk_seams.drop_methods"


def test_the_seams_change_what_the_low_level_server_answers() -> None:
    server = MCPServer("seams")

    async def listing(ctx: object, params: object) -> object:
        raise AssertionError("never called here")

    drop_methods(server, "resources/", "prompts/")
    serve_list_tools(server, listing)  # type: ignore[arg-type]
    assert lowlevel(server).get_request_handler("resources/list") is None
    assert lowlevel(server).get_request_handler("prompts/get") is None
    entry = lowlevel(server).get_request_handler("tools/list")
    assert entry is not None and entry.handler is listing, f"{SDK}: add_request_handler no longer replaces"
    serve_get_prompt(server, listing)  # type: ignore[arg-type]
    entry = lowlevel(server).get_request_handler("prompts/get")
    assert entry is not None and entry.handler is listing
    serve_list_prompts(server, listing)  # type: ignore[arg-type]
    entry = lowlevel(server).get_request_handler("prompts/list")
    assert entry is not None and entry.handler is listing


@pytest.mark.anyio
async def test_our_server_answers_tools_list_through_its_own_handler_and_no_prompts() -> None:
    server = build_server(ApiSettings(), ServerSettings(toolsets=("logs",)))
    assert lowlevel(server).get_request_handler("tools/list").handler == server._list_offered_tools
    async with Client(server) as client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
        assert listed == [case.name for case in CASES if case.toolset == "logs"]
        with pytest.raises(MCPError):
            await client.list_prompts()


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "method"), [("auto", "server/discover"), ("legacy", "initialize")])
async def test_instructions_are_written_for_the_request_in_either_era(mode: str, method: str) -> None:
    """The answer that carries the instructions is still a wire dict with `instructions` on top, in both eras: else
    every connection would read the text fixed at start, naming tools it may not be offered."""
    asked: list[str] = []

    async def write(ctx: ServerRequestContext[Any, Any]) -> str:
        asked.append(ctx.method)
        return f"written for {ctx.method}"

    server = MCPServer("seams", instructions="fixed at start", middleware=[instructions_per_request(write)])
    async with Client(server, mode=mode) as client:
        assert client.instructions == f"written for {method}", f"{SDK}: the {method} answer changed shape"
        await client.list_tools()
    assert asked == [method]


class Answer(BaseModel):
    count: int


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_tool_given_its_output_schema_publishes_it_and_still_validates_each_result(mode: str) -> None:
    """The SDK takes the schema it is given without generating its own, and checks every result against the model:
    else the outline would be published beside a schema nobody reads, or results would go out unchecked."""
    async def count(value: str) -> CallToolResult:
        structured = {"count": len(value)} if value != "wrong" else {"count": "many"}
        return CallToolResult(content=[TextContent(type="text", text=str(structured))], structured_content=structured)

    given = {"type": "object", "properties": {"count": {}}}
    tool = tool_with_output(count, name="count", title="Count", description="Counts.", annotations=ToolAnnotations(),
                            meta=None, output_model=Answer, output_schema=given)
    assert tool.output_schema is given, f"{SDK}: Tool.from_function no longer leaves FuncMetadata's fields live"
    async with Client(MCPServer("seams", tools=[tool]), mode=mode) as client:
        (listed,) = (await client.list_tools()).tools
        assert listed.output_schema == given
        good = await client.call_tool("count", {"value": "four"})
        assert not good.is_error and good.structured_content == {"count": 4}
        bad = await client.call_tool("count", {"value": "wrong"})
        assert bad.is_error, f"{SDK}: a result is no longer validated against FuncMetadata.output_model"
