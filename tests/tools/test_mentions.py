"""What a narrowed request reads names only tools it is offered: descriptions, argument descriptions and prompts,
cut by the rules of `tools/mentions.py` for every narrowing there is, and still reading as sentences."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from typing import Final

import pytest
from mcp.types import Tool
from sandboxed import connected

from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.prompts import PROMPTS
from agent_automation_mcp.server import build_server
from agent_automation_mcp.tools.mentions import TOOL_NAMES, cut_schema, cut_to, named_tools
from agent_automation_mcp.tools.registry import TOOLSETS, all_tools, offered_names
from catalogue import CASES

EVERY = frozenset(TOOL_NAMES)
PROMPT_ARGUMENTS = {"delegate_task": {"task": "Fix the login test", "repository": "o/r"},
                    "runs_status": {"status": "failed"}, "explain_run_failure": {"agent_run_id": "7"},
                    "pull_request_runs": {"pull_request": "o/r#3"}}


def _offered_sets() -> Iterator[frozenset[str]]:
    """The tools of every narrowing a server or a request can make: toolsets x read-only."""
    seen: set[frozenset[str]] = set()
    for count in range(len(TOOLSETS) + 1):
        for toolsets in itertools.combinations(TOOLSETS, count):
            for read_only in (False, True):
                offered = offered_names(ServerSettings(toolsets=toolsets, read_only=read_only))
                if offered not in seen:
                    seen.add(offered)
                    yield offered


def _reads_as_sentences(text: str) -> None:
    flat = " ".join(text.split())
    assert (flat and flat[0].isupper()) or flat.split()[0] in TOOL_NAMES, text
    assert flat.endswith("."), text
    assert not re.search(r" [,;:)]| \.(?!\.)|\( |[,;:][.,;:]|\(\)", flat), text
    assert flat.count("(") == flat.count(")"), text


def _descriptions(schema: object) -> Iterator[str]:
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "description" and isinstance(value, str):
                yield value
            else:
                yield from _descriptions(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _descriptions(item)


def _without(*names: str) -> frozenset[str]:
    return EVERY - set(names)


@pytest.mark.parametrize(("text", "absent", "expected"), [
    ("Name it by pr_id (from get_agent_run or list_agent_runs), or pr_url.", ("get_agent_run",),
     "Name it by pr_id (from list_agent_runs), or pr_url."),
    ("Check the ids: list_organizations, list_repositories, list_users and list_agent_runs list valid ones.",
     ("list_users", "list_agent_runs"), "Check the ids: list_organizations and list_repositories list valid ones."),
    ("Repository id (list_repositories).", ("list_repositories",), "Repository id."),
    ("Repository to work on; see list_repositories.", ("list_repositories",), "Repository to work on."),
    ("The run takes minutes: follow it with get_agent_run (wait_seconds), read its steps with get_agent_run_logs. "
     "Each call starts a new run.", ("get_agent_run_logs",),
     "The run takes minutes: follow it with get_agent_run (wait_seconds). Each call starts a new run."),
    ("The run takes minutes: follow it with get_agent_run, read its steps with get_agent_run_logs.",
     ("get_agent_run",), "The run takes minutes: read its steps with get_agent_run_logs."),
    ("Start a run. Follow it with get_agent_run. Limit: 5 per minute.", ("get_agent_run",),
     "Start a run. Limit: 5 per minute."),
    ("Get a run (the service does not report a state, e.g. draft). get_agent_run_logs reads its trace.",
     ("get_agent_run_logs",), "Get a run (the service does not report a state, e.g. draft)."),
    ("Pass wait_seconds and next_skip, or get_agent_run.", ("get_agent_run",), "Pass wait_seconds and next_skip."),
    ("Wait for it (with get_agent_run (wait_seconds)) here.", ("get_agent_run",), "Wait for it here."),
    ("Ids (of users (list_users) and runs) here.", ("list_users",), "Ids (of users and runs) here."),
])
def test_the_smallest_piece_naming_an_absent_tool_goes(text: str, absent: tuple[str, ...], expected: str) -> None:
    assert cut_to(text, _without(*absent)) == expected


def test_text_naming_no_absent_tool_comes_back_as_it_was() -> None:
    text = "Follow it\nwith get_agent_run (wait_seconds).  Twice."
    assert cut_to(text, EVERY) is text and cut_to(text, _without("list_users")) is text
    schema = {"type": "object", "properties": {"a": {"description": "See get_agent_run."}}}
    assert cut_schema(schema, EVERY) is schema
    assert cut_schema(schema, _without("get_agent_run")) == {"type": "object", "properties": {"a": {}}}


@pytest.mark.anyio
async def test_every_narrowing_reads_only_of_tools_it_offers_in_sentences() -> None:
    """Every tool's description and argument descriptions, and every prompt's, for every set of tools a narrowing
    can offer: no absent tool named, what is left reads as sentences, and what names no absent tool is unchanged."""
    server = build_server(ApiSettings(), ServerSettings(toolsets=TOOLSETS))
    tools: list[Tool] = await server.list_tools()
    prompts = await server.list_prompts()
    cut = 0
    for offered in _offered_sets():
        for tool in tools:
            if tool.name not in offered:
                continue
            description = cut_to(tool.description or "", offered)
            schema = json.dumps(cut_schema(tool.input_schema, offered))
            assert named_tools(description) <= offered and named_tools(schema) <= offered, (tool.name, offered)
            for text in [tool.description or "", *_descriptions(tool.input_schema)]:
                if (fitted := cut_to(text, offered)) != text:
                    cut += 1
                    _reads_as_sentences(fitted)
        for prompt in prompts:
            spec = next(spec for spec in PROMPTS if spec.name == prompt.name)
            if not set(spec.tools) <= offered:
                continue
            texts = [cut_to(prompt.description or "", offered),
                     *(cut_to(argument.description or "", offered) for argument in prompt.arguments or [])]
            assert all(named_tools(text) <= offered for text in texts), (prompt.name, offered)
            assert named_tools(spec.text(spec.arguments.model_validate(PROMPT_ARGUMENTS[spec.name]), offered)) \
                <= offered, (prompt.name, offered)
    assert cut > 100  # the rules were put to work


def test_a_description_cut_for_a_narrowing_reads_as_written_for_it() -> None:
    """What the rules make of the descriptions that name other tools, for the narrowing that cuts them."""
    described = {spec.name: spec.description for spec in all_tools()}

    def flat(name: str, *toolsets: str, read_only: bool = False) -> str:
        offered = offered_names(ServerSettings(toolsets=toolsets, read_only=read_only))
        return " ".join(cut_to(described[name], offered).split())

    assert flat("create_agent_run", "runs") == (
        "Start an AI coding agent on a task, optionally on one repository. The run takes minutes: follow it with "
        "get_agent_run (wait_seconds). Each call starts a new run (10 per minute; the service does not report the "
        "plan's run quota).")
    assert flat("list_models", "org") == "List the models agent runs can use and the default."
    assert flat("list_users", "org") == "List the organisation's users: their ids are the user_id of get_user."
    assert flat("generate_setup_commands", "setup").endswith("in its sandbox. Limit: 5 per minute.")
    assert "(resume_agent_run" not in flat("unban_checks", "checks") and flat("unban_checks", "checks").endswith(
        "Stopped runs stay stopped.")


def test_tool_names_are_recognised_only_as_whole_words() -> None:
    text = "get_agent_run_logs and get_agent_runs_total."
    assert named_tools(text) == {"get_agent_run_logs"}
    assert cut_to("Read it with get_agent_run_logs.", _without("get_agent_run")) == "Read it with get_agent_run_logs."


@pytest.mark.anyio
async def test_an_error_hint_names_only_tools_on_offer() -> None:
    async with connected(toolsets=("logs",)) as (client, _):
        alone = await client.call_tool("get_agent_run_logs", {"agent_run_id": 99_999})
    async with connected(toolsets=("runs", "logs")) as (client, _):
        beside = await client.call_tool("get_agent_run_logs", {"agent_run_id": 99_999})
    assert alone.structured_content["error"]["hint"] == "Check agent_run_id."
    assert "list_agent_runs lists the runs" in beside.structured_content["error"]["hint"]
    assert alone.content[0].text.endswith("Check agent_run_id.")


ONE_TOOLSET: Final = [pytest.param(toolset, read_only, id=f"{toolset}{'-read-only' * read_only}")
                       for toolset in TOOLSETS for read_only in (False, True)
                       if offered_names(ServerSettings(toolsets=(toolset,), read_only=read_only))]


@pytest.mark.anyio
@pytest.mark.parametrize(("toolset", "read_only"), ONE_TOOLSET)
async def test_a_result_names_only_tools_on_offer(toolset: str, read_only: bool) -> None:
    """Summaries, notes and hints of every tool a one-toolset connection offers, for a call that works and, where
    the call names a run or a repository, for one that is not there: a result is read by the model too."""
    async with connected(toolsets=(toolset,), read_only=read_only) as (client, _):
        offered = frozenset(tool.name for tool in (await client.list_tools()).tools)
        said = {}
        for case in (case for case in CASES if case.name in offered):
            missing = [{**case.call, key: 987_654} for key in ("agent_run_id", "repo_id") if key in case.call]
            for arguments in (case.call, *missing):
                result = await client.call_tool(case.name, arguments)
                said[case.name, json.dumps(arguments)] = " ".join(
                    [*(getattr(block, "text", "") for block in result.content), json.dumps(result.structured_content)])
    assert {call: named_tools(text) - offered for call, text in said.items() if named_tools(text) - offered} == {}
