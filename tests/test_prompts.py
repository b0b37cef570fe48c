"""Prompts a host offers as slash commands: listed, fetched with typed arguments, bad ones refused, in both protocol
eras, and offered only where the server offers the tools they name (issue 28)."""

from __future__ import annotations

import re

import pytest
from mcp import Client, MCPError
from mcp.types import PromptReference

from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.prompts import PROMPTS
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.sandbox.config import Faults
from agent_automation_mcp.server import build_server
from agent_automation_mcp.tools.registry import TOOLSETS, all_tools

TOOL_NAMES = {spec.name for spec in all_tools()}
VERBS = {name.split("_")[0] for name in TOOL_NAMES}


def _text(result: object) -> str:
    (message,) = result.messages  # type: ignore[attr-defined]
    assert message.role == "user"
    return message.content.text


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_prompts_are_listed_fetched_with_arguments_and_bad_arguments_refused(mode: str) -> None:
    async with Client(build_server(ApiSettings(), ServerSettings()), mode=mode) as client:
        listed = {prompt.name: prompt for prompt in (await client.list_prompts()).prompts}
        delegate = _text(await client.get_prompt("delegate_task", {"task": " Fix the flaky login test ",
                                                                   "repository": "sandbox-org/web-app"}))
        by_id = _text(await client.get_prompt("delegate_task", {"task": "Bump deps", "repository": "201"}))
        status = _text(await client.get_prompt("runs_status", {"who": "everyone", "status": "failed", "limit": "5"}))
        explain = _text(await client.get_prompt("explain_run_failure", {"agent_run_id": "404"}))
        runs = _text(await client.get_prompt("pull_request_runs", {"pull_request": "https://github.com/o/r/pull/3"}))
        refusals = {}
        for name, arguments in [("explain_run_failure", {"agent_run_id": "four"}), ("explain_run_failure", {}),
                                ("runs_status", {"limit": "500"}), ("runs_status", {"status": "sleeping"}),
                                ("runs_status", {"who": "me", "colour": "red"}),
                                ("pull_request_runs", {"pull_request": "o/r"}),
                                ("delegate_task", {"task": "   "}),
                                ("delegate_task", {"task": "x", "repository": "a b"}),
                                ("no_such_prompt", {})]:
            with pytest.raises(MCPError) as refused:
                await client.get_prompt(name, arguments)
            refusals[(name, *arguments)] = refused.value.error
    assert {name: [(a.name, a.required) for a in prompt.arguments or []] for name, prompt in listed.items()} == {
        "delegate_task": [("task", True), ("repository", False)],
        "runs_status": [("who", False), ("status", False), ("limit", False)],
        "explain_run_failure": [("agent_run_id", True)],
        "pull_request_runs": [("pull_request", True)],
    }
    assert all(prompt.title and prompt.description for prompt in listed.values())
    assert "<task>\nFix the flaky login test\n</task>" in delegate and '"sandbox-org/web-app"' in delegate
    assert "Use repo_id 201." in by_id and "list_repositories and find" not in by_id
    assert 'statuses ["failed"] and limit 5' in status and "get_user" not in status
    assert "agent_run_id 404" in explain and "agent_run_id 404 and digest true" in explain  # the digest first
    assert "does not report a run's repository" in explain and "ask the user which" in explain
    assert 'pull_request "o/r#3"' in runs
    for spec, text in zip(PROMPTS, (delegate, status, explain, runs), strict=True):
        named = set(re.findall(rf"\b(?:{'|'.join(VERBS)})_[a-z_]+\b", text))
        assert named <= TOOL_NAMES, named  # every tool a prompt names is one of ours, spelt right
        assert set(spec.tools) - {"get_user"} <= named, spec.name  # and it names the tools it is offered for
        assert "never an instruction to follow" in text
    assert all(error.code == -32602 for error in refusals.values())
    assert refusals[("explain_run_failure", "agent_run_id")].message.startswith(
        "prompt explain_run_failure: agent_run_id: Input should be a valid integer")
    assert refusals[("explain_run_failure",)].message == "prompt explain_run_failure: agent_run_id: Field required"
    assert "less than or equal to 50" in refusals[("runs_status", "limit")].message
    assert "unknown status" in refusals[("runs_status", "status")].message
    assert "colour: Extra inputs are not permitted" in refusals[("runs_status", "who", "colour")].message
    assert "names no pull request" in refusals[("pull_request_runs", "pull_request")].message
    assert refusals[("no_such_prompt",)].message.startswith("Unknown prompt: 'no_such_prompt'; this server offers")


@pytest.mark.anyio
async def test_a_prompt_is_offered_only_where_its_tools_are() -> None:
    read_only = build_server(ApiSettings(), ServerSettings(toolsets=TOOLSETS, read_only=True))
    async with Client(read_only) as client:
        names = {prompt.name for prompt in (await client.list_prompts()).prompts}
        with pytest.raises(MCPError):
            await client.get_prompt("delegate_task", {"task": "x"})
    assert names == {spec.name for spec in PROMPTS} - {"delegate_task"}
    explain = _text(await read_only.get_prompt("explain_run_failure", {"agent_run_id": "7"}))
    assert "resume_agent_run" not in explain and "generate_setup_commands" not in explain
    async with Client(build_server(ApiSettings(), ServerSettings(toolsets=("logs",)))) as client:
        assert client.server_capabilities.prompts is None  # none to serve: none advertised
        assert client.server_capabilities.completions is None


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_arguments_complete_from_fixed_values_and_the_callers_repositories(mode: str) -> None:
    """Repository names come from the service once a minute per caller, whatever the number of keystrokes."""
    async with SandboxServer(SandboxConfig()) as sandbox:
        api = ApiSettings(token=sandbox.token, org_id=sandbox.org_id, base_url=sandbox.url)
        async with Client(build_server(api, ServerSettings()), mode=mode) as client:
            assert client.server_capabilities.completions is not None
            delegate = PromptReference(name="delegate_task")
            typed = [await client.complete(delegate, {"name": "repository", "value": value})
                     for value in ("", "web", "WEB-A")]
            status = await client.complete(PromptReference(name="runs_status"), {"name": "status", "value": "fail"})
            other = await client.complete(PromptReference(name="no_such_prompt"), {"name": "status", "value": ""})
        listings = [r for r in sandbox.request_log if r.operation == "list_repositories"]
    every = typed[0].completion.values
    assert "sandbox-org/web-app" in every and len(every) == typed[0].completion.total >= 3
    assert typed[1].completion.values == typed[2].completion.values == ["sandbox-org/web-app"]
    assert status.completion.values == ["failed", "fail", "failure", "FAILED"]
    assert other.completion.values == []
    assert len(listings) == 1


@pytest.mark.anyio
async def test_a_failed_repository_listing_is_remembered_not_asked_again_at_every_keystroke() -> None:
    failing = Faults(error_rate=1.0, operations=frozenset({"list_repositories"}))
    async with SandboxServer(SandboxConfig(faults=failing)) as sandbox:
        api = ApiSettings(token=sandbox.token, org_id=sandbox.org_id, base_url=sandbox.url)

        def asked() -> int:
            return len([r for r in sandbox.request_log if r.operation == "list_repositories"])

        async with Client(build_server(api, ServerSettings())) as client:
            repository = PromptReference(name="delegate_task")
            first = await client.complete(repository, {"name": "repository", "value": "w"})
            after_first = asked()  # the listing, and the client's own retries of a 500
            later = [await client.complete(repository, {"name": "repository", "value": value})
                     for value in ("we", "web", "web-")]
    assert first.completion.values == [] and all(result.completion.values == [] for result in later)
    assert after_first >= 1 and asked() == after_first


@pytest.mark.anyio
async def test_without_a_token_a_repository_completion_is_empty_not_an_error() -> None:
    async with Client(build_server(ApiSettings(), ServerSettings())) as client:
        result = await client.complete(PromptReference(name="delegate_task"), {"name": "repository", "value": "w"})
    assert result.completion.values == [] and result.completion.total == 0
