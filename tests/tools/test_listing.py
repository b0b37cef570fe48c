"""What `tools/list` costs: built once per tool set and era, cache hints for clients, schemas in fewer characters."""

from __future__ import annotations

import pytest
from mcp import Client

from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.server import TOOLS_LIST_HINT, build_server
from agent_automation_mcp.tools.input_schemas import compact_schema


@pytest.mark.anyio
async def test_the_list_is_built_once_per_era_and_tells_clients_how_long_to_keep_it() -> None:
    server = build_server(ApiSettings(), ServerSettings())
    async with Client(server) as client:
        first = await client.list_tools(cache_mode="bypass")
        again = await client.list_tools(cache_mode="bypass")
    assert len(server.listings) == 1
    assert first == again and first.tools
    assert (first.ttl_ms, first.cache_scope) == (TOOLS_LIST_HINT.ttl_ms, "private") and first.ttl_ms >= 60_000
    async with Client(server, mode="legacy") as client:
        legacy = await client.list_tools()
    assert len(server.listings) == 2 and [t.name for t in legacy.tools] == [t.name for t in first.tools]


def test_a_definition_used_once_is_written_where_it_is_used() -> None:
    run = {"title": "Run", "type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
    schema = {"type": "object", "$defs": {"Run": run, "Ref": {"type": "string"},
                                          "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
              "properties": {"runs": {"type": "array", "items": {"$ref": "#/$defs/Run"}},
                             "a": {"$ref": "#/$defs/Ref"}, "b": {"$ref": "#/$defs/Ref"},
                             "tree": {"$ref": "#/$defs/Node"}}}
    node = {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}
    assert compact_schema(schema) == {
        "type": "object",
        "properties": {"runs": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}},
                                                           "required": ["id"]}},
                       "a": {"$ref": "#/$defs/Ref"}, "b": {"$ref": "#/$defs/Ref"},  # used twice: kept
                       "tree": {"$ref": "#/$defs/Node"}},  # inside itself: kept
        "$defs": {"Ref": {"type": "string"}, "Node": node},
    }
