"""What the service cannot do is said where a model reaches for it, with the closest thing that can: a value asking
for it is refused naming the value and why (nothing sent), a tool named for it is answered so, and the instructions
say each one. The table is tied to the service's operations: none of them does what it says the service cannot."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client, MCPError
from sandboxed import connected

from agent_automation_mcp.api.operations import EXCLUDED_OPERATIONS, OPERATIONS
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.guide import instructions
from agent_automation_mcp.tools.checks import CLOSEST_TO_CANCEL
from agent_automation_mcp.tools.missing_actions import AGENT_RUN, MISSING_ACTIONS, TARGET_WORDS, named_in
from agent_automation_mcp.tools.registry import TOOLSETS
from catalogue import PR_ID, RUN_WITH_PR


async def _refused(client: Client, tool: str) -> str:
    with pytest.raises(MCPError) as refused:
        await client.call_tool(tool, {})
    return refused.value.error.message


@pytest.mark.anyio
async def test_merging_is_refused_naming_what_was_asked_and_where_it_can_be_done() -> None:
    async with connected(toolsets=TOOLSETS) as (client, sandbox):
        before = len(sandbox.request_log)
        result = await client.call_tool("edit_pull_request", {"pr_id": PR_ID, "state": "merged"})
        sent = sandbox.request_log[before:]
        run = (await client.call_tool("get_agent_run", {"agent_run_id": RUN_WITH_PR})).structured_content
    error = (result.structured_content or {})["error"]
    assert result.is_error and error["kind"] == "invalid_arguments" and sent == []  # refused before any request
    assert 'state: asked "merged": the service cannot merge a pull request' in error["message"]
    assert "Fix the arguments" not in error["hint"]
    assert "in GitHub at the pull request's url" in error["hint"] and "closed is not merged" in error["hint"]
    assert run is not None and run["pull_requests"][0]["url"]  # where the hint sends the model: the url is there


@pytest.mark.anyio
@pytest.mark.parametrize(("asked", "said"), [
    ("bogus", 'state: asked "bogus": Input should be'),  # any refused word is named as asked
    ("ready for review", "'ready_for_review'"),  # a valid word misspelt gets the list of valid ones, not a "cannot"
])
async def test_other_refused_words_are_named_as_asked(asked: str, said: str) -> None:
    async with connected(toolsets=TOOLSETS) as (client, _):
        result = await client.call_tool("edit_pull_request", {"pr_id": PR_ID, "state": asked})
    error = (result.structured_content or {})["error"]
    assert said in error["message"] and "cannot" not in error["message"]
    assert error["hint"] == "Fix the arguments named in the message; nothing was sent."


@pytest.mark.anyio
@pytest.mark.parametrize("action", MISSING_ACTIONS, ids=lambda action: action.what)
async def test_a_tool_named_for_what_the_service_cannot_do_is_told_so_and_the_closest_thing(action: object) -> None:
    assert hasattr(action, "words") and hasattr(action, "target")
    noun = "agent_run" if action.target == AGENT_RUN else "pull_request"
    async with connected(toolsets=TOOLSETS) as (client, _):
        message = await _refused(client, f"{action.words[0]}_{noun}")
    assert message == f"Unknown tool: {action.words[0]}_{noun}. No tool can {action.what}: the service cannot. " \
                      f"Nothing was sent: {action.closest}."


@pytest.mark.anyio
async def test_a_real_tool_left_out_is_only_unknown_and_the_closest_thing_names_only_tools_on_offer() -> None:
    async with connected() as (client, _):  # the default toolsets: webhooks off
        off = await _refused(client, "delete_webhook")  # "delete", but a tool of ours
    assert off == "Unknown tool: delete_webhook."
    async with connected(toolsets=("runs",)) as (client, _):
        cut = await _refused(client, "cancel_agent_run")
    said = " No tool can stop an agent run: the service cannot. Nothing was sent." if CLOSEST_TO_CANCEL else ""
    assert cut == f"Unknown tool: cancel_agent_run.{said}"  # the closest thing cut: checks is not offered
    assert named_in("get_pull_request_comments") == ""  # a name that asks to read is no action


def test_the_instructions_say_each_thing_the_service_cannot_do() -> None:
    text = instructions(ServerSettings(toolsets=TOOLSETS))
    for action in MISSING_ACTIONS:
        sentence = next(part for part in text.split(". ") if part.startswith("The service cannot")
                        and part.split(": ")[0].endswith(action.target))
        assert action.verb in sentence.split(": ")[0] and action.closest in sentence, action.what


def test_no_operation_of_the_service_does_what_the_table_says_it_cannot(openapi_document: dict[str, Any]) -> None:
    """Each operation of the service (the reference OpenAPI's operation ids: the table's and the ones left out), by
    the words of its id (`edit_pull_request_simple`, `remove_codegen_from_pr`): where it names a pull request or a run,
    it does none of the table's actions on that target (stopping a run leaves the table once an operation stops one:
    `RunEffect.STOPS`)."""
    ids = [op.operation_id for op in OPERATIONS.values()] + list(EXCLUDED_OPERATIONS)
    assert sorted(ids) == sorted(op["operationId"] for methods in openapi_document["paths"].values()
                                 for op in methods.values())  # tests/api/test_operations.py says which differs
    for operation_id in ids:
        name = operation_id.split("_v1")[0]
        for target, known in TARGET_WORDS.items():
            if known & set(name.split("_")):
                clashing = [action.what for action in MISSING_ACTIONS if action.target == target
                            and any(f"_{word}_" in f"_{name}_" for word in action.words)]
                assert not clashing, (
                    f"the service's {operation_id} does what MISSING_ACTIONS (src/agent_automation_mcp/tools/"
                    f"missing_actions.py) says it cannot: {clashing}; take it out there, or correct its words")
