"""A default repository per connection (issue 47): with AGENT_AUTOMATION_REPO_ID (here; X-Repo-Id over HTTP in
tests/e2e/test_remote.py) create_agent_run and generate_setup_commands act on it when a call names none, a call's own
repo_id wins, the instructions name it, and one the organisation does not have is refused before any write."""

from __future__ import annotations

from urllib.parse import parse_qs

import pytest
from sandboxed import connected

from agent_automation_mcp.tools import default_repository
from catalogue import REPO_ID

DEFAULT = 202  # sandbox-org/api-service; REPO_ID (201) is another of the organisation's


@pytest.mark.anyio
async def test_a_default_repository_serves_the_calls_that_name_none_and_a_calls_own_wins() -> None:
    async with connected(repo_id=DEFAULT) as (client, sandbox):
        told = client.instructions or ""
        started = [await client.call_tool("create_agent_run", {"prompt": f"Task {index}"}) for index in range(2)]
        own = await client.call_tool("create_agent_run", {"prompt": "Elsewhere", "repo_id": REPO_ID})
        setup = await client.call_tool("generate_setup_commands", {})
        sent = [record.operation for record in sandbox.request_log]
        world = sandbox.state.world
    assert f'default repository is {DEFAULT} ("sandbox-org/api-service"), set by AGENT_AUTOMATION_REPO_ID' in told
    assert "create_agent_run and generate_setup_commands use that repository when a call gives no repo_id" in told
    for result in started:
        assert not result.is_error and world.runs[result.structured_content["id"]].repo_id == DEFAULT
        assert f"on repository {DEFAULT}, this connection's default (AGENT_AUTOMATION_REPO_ID)" in result.content[
            0].text
    assert world.runs[own.structured_content["id"]].repo_id == REPO_ID and "default" not in own.content[0].text
    assert world.runs[setup.structured_content["agent_run_id"]].repo_id == DEFAULT
    assert sent.count("list_repositories") == 1  # read once (for the instructions), then remembered


@pytest.mark.anyio
async def test_a_default_the_organisation_does_not_have_is_refused_before_any_write() -> None:
    async with connected(repo_id=1201) as (client, sandbox):  # a repository of another organisation
        told = client.instructions or ""
        sandbox.request_log.clear()
        refused = {tool: await client.call_tool(tool, arguments) for tool, arguments in (
            ("create_agent_run", {"prompt": "x"}), ("generate_setup_commands", {}))}
        writes = [r.operation for r in sandbox.request_log if r.method != "GET"]
        own = await client.call_tool("create_agent_run", {"prompt": "x", "repo_id": REPO_ID})
    assert "default repository, 1201 (set by AGENT_AUTOMATION_REPO_ID), is not among this organisation's" in told
    for tool, result in refused.items():
        error = result.structured_content["error"]
        assert result.is_error and error["kind"] == "configuration", tool
        assert error["message"].startswith(f"{tool}: this connection's default repository, 1201") and (
            "nothing was started" in error["message"]) and "repo_id" in error["hint"]
    assert writes == [] and not own.is_error


@pytest.mark.anyio
async def test_without_a_default_nothing_changes_and_setup_commands_asks_for_a_repository() -> None:
    async with connected() as (client, sandbox):
        told = client.instructions or ""
        sandbox.request_log.clear()
        started = await client.call_tool("create_agent_run", {"prompt": "Anywhere"})
        setup = await client.call_tool("generate_setup_commands", {})
        sent = [record.operation for record in sandbox.request_log]
    assert "default repository" not in told and not started.is_error
    assert sent == ["create_agent_run"]  # the service picks the organisation's own default, as before
    error = setup.structured_content["error"]
    assert error["kind"] == "invalid_arguments" and "no default repository" in error["message"]


@pytest.mark.anyio
async def test_a_default_is_looked_for_past_the_first_page_of_repositories(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(default_repository, "REPOS_PAGE", 2)
    async with connected(repo_id=205) as (client, sandbox):  # the fifth: on the third page of two
        result = await client.call_tool("create_agent_run", {"prompt": "x"})
        pages = [parse_qs(r.query) for r in sandbox.request_log if r.operation == "list_repositories"]
    assert not result.is_error and sandbox.state.world.runs[result.structured_content["id"]].repo_id == 205
    assert [(page["skip"], page["limit"]) for page in pages] == [(["0"], ["2"]), (["2"], ["2"]), (["4"], ["2"])]
