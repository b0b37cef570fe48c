"""The tool surface: names, toolsets, coverage of the operation table, annotations, filters, schemas, budget."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.server import MCPServer

from agent_automation_mcp.api.operations import OPERATIONS
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.server import build_server
from agent_automation_mcp.tools.input_schemas import compact_schema
from agent_automation_mcp.tools.registry import (
    DEFAULT_TOOLSETS,
    OPERATIONS_WITHOUT_TOOL,
    TOOLSETS,
    all_tools,
    select_tools,
)
from agent_automation_mcp.view import VIEW_URI
from budget import BUDGET_TOKENS, measure
from catalogue import CASES, catalogue_gap

ROOT = Path(__file__).parents[2]
SNAPSHOTS = Path(__file__).parent / "snapshots"

# The names and groups are public (users' prompts and configurations name them): `tests/catalogue.py` pins them.
EXPECTED = {toolset: [case.name for case in CASES if case.toolset == toolset]
            for toolset in dict.fromkeys(case.toolset for case in CASES)}
DESTRUCTIVE = {case.name for case in CASES if case.destructive}


def _wire(tools: list[Any]) -> list[dict[str, Any]]:
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]


async def _listed(settings: ServerSettings) -> list[dict[str, Any]]:
    async with Client(build_server(ApiSettings(), settings)) as client:
        return _wire((await client.list_tools()).tools)


def test_names_and_toolsets_are_exactly_the_issues() -> None:
    grouped: dict[str, list[str]] = {}
    for spec in all_tools():
        grouped.setdefault(spec.toolset, []).append(spec.name)
    assert not (gap := catalogue_gap([spec.name for spec in all_tools()])), gap
    moved = [f"{case.name} (ToolCase: {case.toolset}; declared in {spec.toolset})" for case in CASES
             for spec in all_tools() if spec.name == case.name and spec.toolset != case.toolset]
    assert not moved, f"tests/catalogue.py names another toolset than the declaration for {', '.join(moved)}"
    assert grouped == EXPECTED
    assert tuple(EXPECTED) == TOOLSETS
    assert tuple(dict.fromkeys(case.toolset for case in CASES if case.default)) == DEFAULT_TOOLSETS
    assert set(TOOLSETS) - set(DEFAULT_TOOLSETS) >= {"oauth", "webhooks"}  # the issue's opt-in ones stay so


def test_every_operation_reaches_a_tool_or_is_excluded_with_a_reason() -> None:
    reached = {op for spec in all_tools() for op in spec.operations}
    both = sorted(reached & set(OPERATIONS_WITHOUT_TOOL))
    assert not both, (f"{both} sent by a tool yet listed in OPERATIONS_WITHOUT_TOOL (src/agent_automation_mcp/tools/"
                      "registry.py): take them out of it")
    neither = sorted(set(OPERATIONS) - reached - set(OPERATIONS_WITHOUT_TOOL))
    assert not neither, (f"{neither} sent by no tool: name them in a tool's toolset.tool(...), or list them with the "
                         "reason in OPERATIONS_WITHOUT_TOOL (src/agent_automation_mcp/tools/registry.py)")
    assert all(len(reason) > 20 for reason in OPERATIONS_WITHOUT_TOOL.values())
    # The two operations the issue folds into one tool each.
    by_name = {spec.name: spec for spec in all_tools()}
    assert set(by_name["get_user"].operations) == {"get_user", "get_current_user"}
    assert set(by_name["edit_pull_request"].operations) == {"edit_pull_request", "edit_pull_request_simple",
                                                            "list_agent_runs",  # finds a pr_id from a pr_url
                                                            "list_repositories"}  # or from repo_id and number


@pytest.mark.anyio
async def test_listed_annotations_come_from_the_operation_table() -> None:
    listed = {tool["name"]: tool for tool in await _listed(ServerSettings(toolsets=TOOLSETS))}
    assert not (gap := catalogue_gap(list(listed))), gap
    for spec in all_tools():
        ops = [OPERATIONS[op] for op in spec.operations]
        hints = listed[spec.name]["annotations"]
        # Hints at the protocol's defaults (readOnlyHint false, openWorldHint true) are left out.
        assert hints.get("readOnlyHint", False) is all(op.read_only for op in ops), spec.name
        assert "openWorldHint" not in hints
        if hints.get("readOnlyHint"):
            assert "destructiveHint" not in hints and "idempotentHint" not in hints
        else:
            assert hints["destructiveHint"] is any(op.destructive for op in ops), spec.name
            assert hints["idempotentHint"] is all(op.idempotent for op in ops), spec.name
    destructive = {n for n, t in listed.items() if t["annotations"].get("destructiveHint")}
    assert destructive == DESTRUCTIVE, (
        f"destructive by the table: {sorted(destructive)}; by tests/catalogue.py: {sorted(DESTRUCTIVE)}: give the "
        "ToolCase of each that differs the effect \"destroys\" or \"writes\" the table's operations make it")
    assert not listed["create_agent_run"]["annotations"]["idempotentHint"]
    assert listed["update_check_suite_settings"]["annotations"]["idempotentHint"]


def test_read_only_ceiling_and_toolset_filter() -> None:
    read_only = select_tools(ServerSettings(toolsets=TOOLSETS, read_only=True))
    assert not (gap := catalogue_gap([s.name for s in read_only], [case for case in CASES if case.read_only])), gap
    logs_only = [s.name for s in select_tools(ServerSettings(toolsets=("logs",)))]
    assert not (gap := catalogue_gap(logs_only, [case for case in CASES if case.toolset == "logs"])), gap
    assert "revoke_oauth_tokens" not in {s.name for s in select_tools(ServerSettings())}


@pytest.mark.anyio
async def test_every_tool_has_a_description_bounded_arguments_and_an_output_schema() -> None:
    """Every id is at least 1 and a page at most 100, as the server validates them; the listing leaves out the
    bounds only a mistake meets (an id's 1), and keeps those a model may reach (a page's 100)."""
    server = build_server(ApiSettings(), ServerSettings(toolsets=TOOLSETS))
    validated = {tool.name: tool.input_schema for tool in await MCPServer.list_tools(server)}
    for tool in await _listed(ServerSettings(toolsets=TOOLSETS)):
        assert 40 <= len(tool["description"]) <= 400, tool["name"]
        assert tool["title"]
        assert tool["inputSchema"]["type"] == "object"
        assert tool["outputSchema"]["type"] == "object"
        for name, prop in tool["inputSchema"]["properties"].items():
            checked = json.dumps(validated[tool["name"]]["properties"][name])
            if name.endswith("_id") and "integer" in json.dumps(prop):
                assert '"minimum": 1' in checked and "minimum" not in prop, (tool["name"], name)
            if name == "limit":
                assert '"minimum": 1' in checked and prop["maximum"] == 100, tool["name"]


@pytest.mark.anyio
async def test_tool_schemas_match_the_snapshots() -> None:
    """Any change to what a model sees is a reviewed diff. Regenerate with UPDATE_SNAPSHOTS=1."""
    tools = await _listed(ServerSettings(toolsets=TOOLSETS))
    update = os.environ.get("UPDATE_SNAPSHOTS") == "1"
    if update:
        SNAPSHOTS.mkdir(exist_ok=True)
        for stale in SNAPSHOTS.glob("*.json"):
            stale.unlink()
    assert not (gap := catalogue_gap([tool["name"] for tool in tools])), gap
    for tool in tools:
        path = SNAPSHOTS / f"{tool['name']}.json"
        text = json.dumps(tool, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        if update:
            path.write_text(text)
        assert path.exists(), (f"no snapshot for {tool['name']} in {SNAPSHOTS.relative_to(ROOT)}: UPDATE_SNAPSHOTS=1 "
                               ".venv/bin/pytest tests/tools/test_registry.py writes it")
        assert path.read_text() == text, (f"{tool['name']} changed from {path.relative_to(ROOT)}: review the diff, "
                                          "then UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/tools/test_registry.py")
    stale = sorted({p.stem for p in SNAPSHOTS.glob("*.json")} - {t["name"] for t in tools})
    assert not stale, (f"snapshots of tools no longer served: {stale}: UPDATE_SNAPSHOTS=1 .venv/bin/pytest "
                       "tests/tools/test_registry.py removes them")


@pytest.mark.anyio
async def test_default_tools_list_fits_the_context_budget() -> None:
    """The budget counts what a model reads (name, description, input schema); the whole list is reported beside it,
    and each tool's cost, largest first, so that a failure shows where the room went.

    Fields only the host reads (`_meta`, output schemas, annotations, task support) are not in the budget: a
    description is never shortened to make room for them.
    """
    measured = await measure()
    costs = "\n".join(f"  {cost:>5}  {name}" for name, cost in measured.costs())
    report = (f"default tools, what a model reads: ≈ {measured.model_tokens} tokens (budget {BUDGET_TOKENS}); the "
              f"whole tools/list: ≈ {measured.whole_tokens} tokens; each tool (name, description, input schema), "
              f"largest first:\n{costs}")
    print(f"\n{report}")
    assert measured.model_tokens <= BUDGET_TOKENS, (
        f"{report}\nover the budget by {measured.model_tokens - BUDGET_TOKENS}: shorten descriptions or schemas of "
        "default tools (a product decision), or put the new tool in an opt-in toolset (toolsets.py)")


@pytest.mark.anyio
async def test_each_default_toolset_fits_its_share_of_the_budget() -> None:
    """Each default toolset owns a share of the budget, declared beside it (`Toolset(..., budget=N)` in
    tools/<name>.py), and the shares add up to the budget: a new tool meets its own toolset's share, named with its
    tools' costs, rather than the whole listing (docs/adding-an-operation.md says who moves a share)."""
    rows = (await measure()).toolset_costs()
    lines = [f"  {name:<10} {cost:>5} of {share:>5} ({', '.join(f'{tool} {each}' for tool, each in tools)})"
             for name, share, cost, tools in rows]
    print("\ndefault toolsets, cost of share:\n" + "\n".join(lines))
    shares = sum(share for _, share, _, _ in rows)
    assert shares == BUDGET_TOKENS, (
        f"the default toolsets' shares add up to {shares}, not the budget of {BUDGET_TOKENS}: a share is raised only "
        "by lowering another's (the budget= of each toolset = Toolset(...) line in tools/<name>.py)")
    over = [f"toolset {name} (tools/{name}.py) costs {cost} tokens, over its share of {share} by {cost - share}: its "
            f"tools cost {', '.join(f'{tool} {each}' for tool, each in tools)}. Shorten this toolset's descriptions "
            "or schemas, move a share to it from another toolset's budget= (docs/adding-an-operation.md, \"The context "
            "budget\"), or put the tool in an opt-in toolset" for name, share, cost, tools in rows if cost > share]
    assert not over, "\n".join(over)


def test_compact_schema_keeps_meaning() -> None:
    schema = {
        "title": "X", "type": "object",
        "properties": {
            "title": {"title": "Title", "type": "string"},
            "state": {"anyOf": [{"enum": ["a", "b"], "type": "string"}, {"type": "null"}], "default": None},
            "n": {"anyOf": [{"type": "integer", "minimum": 1, "description": "inner"}, {"type": "null"}],
                  "description": "outer"},
            "ref": {"anyOf": [{"$ref": "#/$defs/R"}, {"type": "null"}]},
            "must": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "map": {"type": "object", "additionalProperties": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
            "page": {"type": "integer", "minimum": 1, "maximum": 100},  # a model may reach 100
            "skip": {"type": "integer", "minimum": 0, "maximum": 1_000_000},
            "text": {"type": "string", "minLength": 1, "maxLength": 100_000, "pattern": "\\S"},
            "word": {"type": "string", "minLength": 2, "maxLength": 40, "pattern": "^[a-z]+$"},
            "flag": {"type": "boolean", "default": True},
        },
        "required": ["must"],
    }
    # An argument that may be left out is listed without null (leaving it out says none); a required one, and a
    # null inside an argument (a map's value that removes its key), keep it.
    assert compact_schema(schema) == {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "state": {"enum": ["a", "b"], "type": "string"},
            "n": {"type": "integer", "description": "outer"},  # a minimum of 1 only a mistake meets
            "ref": {"anyOf": [{"$ref": "#/$defs/R"}, {"type": "null"}]},
            "must": {"type": ["string", "null"]},
            "map": {"type": "object", "additionalProperties": {"type": ["integer", "null"]}},
            "page": {"type": "integer", "maximum": 100},
            "skip": {"type": "integer"},
            "text": {"type": "string"},
            "word": {"type": "string", "minLength": 2, "maxLength": 40, "pattern": "^[a-z]+$"},
            "flag": {"type": "boolean", "default": True},
        },
        "required": ["must"],
    }
    assert compact_schema({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": True},
                                                            "n": {"type": "object", "additionalProperties": False}}}) \
        == {"type": "object", "properties": {"m": {"type": "object"},
                                             "n": {"type": "object", "additionalProperties": False}}}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_only_what_is_served_is_advertised(mode: str) -> None:
    """Tools, prompts and the one view resource: no templates behind empty lists, no notifications that never come."""
    async with Client(build_server(ApiSettings(), ServerSettings()), mode=mode) as client:
        capabilities = client.server_capabilities
        assert capabilities.tools is not None and not capabilities.tools.list_changed
        assert capabilities.prompts is not None and not capabilities.prompts.list_changed
        assert capabilities.resources is not None and not capabilities.resources.list_changed
        assert [resource.uri for resource in (await client.list_resources()).resources] == [VIEW_URI]
        with pytest.raises(MCPError) as caught:
            await client.list_resource_templates()
        assert caught.value.error.code == -32601  # method not found
