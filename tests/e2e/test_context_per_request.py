"""What a model is told fits the request (issue 33): over HTTP in both protocol eras, each way a request is narrowed
(`X-MCP-Toolsets`, `X-MCP-Readonly`) reads only of the tools it is offered, in its instructions, tool descriptions
and prompts; the instructions name the organisation the request acts in, or say why none and how to choose; and an
organisation this deployment does not serve is refused with the real reason. Over stdio, the operator's flags."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from harness import MODES, RATE_LIMITS, HttpServer, clean_env, sandbox_env, stdio_server, tenant_client
from mcp import Client, MCPError
from mcp.types import PromptReference

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.prompts import PROMPTS
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.sandbox.config import DEMO_TOKEN
from agent_automation_mcp.tools.mentions import named_tools

SOLO = "tok-context-solo"  # belongs to organisation 1 only; DEMO_TOKEN to 1 and 2
ARGUMENTS = {"delegate_task": {"task": "Fix the login test"}, "runs_status": {}, "explain_run_failure":
             {"agent_run_id": "404"}, "pull_request_runs": {"pull_request": "o/r#3"}}
NARROWINGS = [{"x_mcp_readonly": "true"}, {"x_mcp_toolsets": "runs"}, {"x_mcp_toolsets": "setup,org"},
              {"x_mcp_toolsets": "org,checks", "x_mcp_readonly": "true"}]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    config = SandboxConfig(visible_orgs=2, tokens=(DEMO_TOKEN, SOLO), token_orgs={SOLO: (1,)},
                           rate_limits=parse_rate_limits(RATE_LIMITS))
    with SandboxServer(config) as server:
        yield server


@pytest.fixture(scope="module")
def server(sandbox: SandboxServer) -> Iterator[HttpServer]:
    server = HttpServer(clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS,
                                  AGENT_AUTOMATION_TOOLSETS="all"), "--auth", "request")
    yield server
    server.stop()


async def told(client: Client) -> dict[str, Any]:
    """Everything a model reads of this connection: instructions, tools (descriptions, schemas), prompts (listed and
    rendered), and which prompts a fetch refuses."""
    tools = (await client.list_tools()).tools
    prompts = (await client.list_prompts()).prompts if client.server_capabilities.prompts else []
    rendered, refused = {}, set()
    for spec in PROMPTS:
        try:
            result = await client.get_prompt(spec.name, ARGUMENTS[spec.name])
            rendered[spec.name] = result.messages[0].content.text  # type: ignore[union-attr]
        except MCPError:
            refused.add(spec.name)
    return {"instructions": client.instructions or "", "tools": {tool.name: tool for tool in tools},
            "prompts": {prompt.name: prompt for prompt in prompts}, "rendered": rendered, "refused": refused}


def assert_names_only_what_is_offered(seen: dict[str, Any]) -> None:
    offered = set(seen["tools"])
    assert named_tools(seen["instructions"]) <= offered, seen["instructions"]
    for tool in seen["tools"].values():
        assert named_tools(f"{tool.description} {json.dumps(tool.input_schema)}") <= offered, tool.name
    assert set(seen["prompts"]) == set(seen["rendered"])  # what is listed can be fetched, and nothing else
    for spec in PROMPTS:
        assert (spec.name in seen["prompts"]) is (set(spec.tools) <= offered), spec.name
    for name, prompt in seen["prompts"].items():
        words = " ".join([prompt.description or "", *(a.description or "" for a in prompt.arguments or []),
                          seen["rendered"][name]])
        assert named_tools(words) <= offered, name


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("narrowing", NARROWINGS, ids=lambda n: "+".join(f"{k}={v}" for k, v in n.items()))
async def test_a_narrowed_request_is_told_only_of_the_tools_it_is_offered(server: HttpServer, sandbox: SandboxServer,
                                                                          mode: str, narrowing: dict[str, str]) -> None:
    async with tenant_client(server.url, mode, authorization=f"Bearer {SOLO}", **narrowing) as client:
        seen = await told(client)
        completed = await client.complete(PromptReference(name="delegate_task"), {"name": "repository", "value": ""})
    async with tenant_client(server.url, mode, authorization=f"Bearer {SOLO}") as client:
        whole = await told(client)
    assert_names_only_what_is_offered(seen)
    assert_names_only_what_is_offered(whole)
    assert set(seen["tools"]) < set(whole["tools"]) and set(whole["prompts"]) == {spec.name for spec in PROMPTS}
    if narrowing.get("x_mcp_readonly"):  # the case: no run to start, and the guide says so
        assert "create_agent_run" not in seen["instructions"] and "delegate_task" in seen["refused"]
        assert "Read-only for this connection" in seen["instructions"]
        assert completed.completion.values == []  # nor completed, for a prompt it is not offered
    if narrowing.get("x_mcp_toolsets") == "runs":
        described = " ".join((seen["tools"]["create_agent_run"].description or "").split())
        assert "get_agent_run (wait_seconds)" in described and "get_agent_run_logs" not in described
        assert "Toolsets this connection leaves out: logs, checks" in seen["instructions"]
        assert "list_repositories" not in json.dumps(seen["tools"]["create_agent_run"].input_schema)
    assert 'This connection acts in organisation 1 ("Sandbox Org")' in seen["instructions"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_the_instructions_and_results_name_the_organisation_each_request_acts_in(
        server: HttpServer, mode: str) -> None:
    async with tenant_client(server.url, mode, authorization=f"Bearer {DEMO_TOKEN}", x_organization_id="2") as chosen:
        named = chosen.instructions or ""
        listed = (await chosen.call_tool("list_organizations", {})).structured_content
        integrations = await chosen.call_tool("list_integrations", {})
    async with tenant_client(server.url, mode, authorization=f"Bearer {SOLO}") as solo:
        only = solo.instructions or ""
        solo_listed = await solo.call_tool("list_organizations", {})
    async with tenant_client(server.url, mode, authorization=f"Bearer {DEMO_TOKEN}") as unchosen:
        several = unchosen.instructions or ""
        refused = await unchosen.call_tool("list_users", {})
        unmarked = await unchosen.call_tool("list_organizations", {})
    assert 'This connection acts in organisation 2 ("Sandbox Org 2")' in named
    assert [(org["id"], org["in_use"]) for org in listed["organizations"]] == [(1, False), (2, True)]
    assert integrations.structured_content["organization_id"] == 2 and "in organisation 2" in \
        integrations.content[0].text and integrations.structured_content["organization_name"] == "Sandbox Org 2"
    assert 'This connection acts in organisation 1 ("Sandbox Org")' in only
    assert "this connection acts in 1" in solo_listed.content[0].text
    assert ('No organisation is chosen: this API token belongs to 2 (1 "Sandbox Org", 2 "Sandbox Org 2")' in several
            and "Send the X-Organization-Id header with one of them" in several)
    assert refused.is_error and "sees 2 organisations" in refused.content[0].text  # as the instructions said
    assert not any(org["in_use"] for org in unmarked.structured_content["organizations"])
    assert "none is chosen for this connection: Send the X-Organization-Id header" in unmarked.content[0].text


def test_an_organisation_this_deployment_does_not_serve_is_refused_with_the_real_reason(
        sandbox: SandboxServer) -> None:
    """Organisations 1 and 3 served; SOLO belongs to 1, DEMO_TOKEN to 1 and 2; nobody to 3."""
    server = HttpServer(clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS,
                                  AGENT_AUTOMATION_ALLOWED_ORGS="1,3"), "--auth", "request")
    try:
        answers = {(token, named): httpx2.post(server.url, timeout=30, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
            headers={"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream",
                     **({"x-organization-id": named} if named else {})})
            for token, named in [(DEMO_TOKEN, "2"), (SOLO, "3"), (DEMO_TOKEN, None)]}
    finally:
        server.stop()
    not_served, not_theirs = answers[(DEMO_TOKEN, "2")].json()["error"], answers[(SOLO, "3")].json()["error"]
    assert answers[(DEMO_TOKEN, "2")].status_code == answers[(SOLO, "3")].status_code == 403
    assert not_served["data"]["message"] == "this server does not serve organisation 2"
    assert not_theirs["data"]["message"] == "this API token does not belong to organisation 3"
    for error in (not_served, not_theirs):
        assert error["data"]["hint"].startswith("Send X-Organization-Id: 1 (this token's organisation that this "
                                                "server serves), or leave the header out")
        assert "belongs to none" not in json.dumps(error)
    served = answers[(DEMO_TOKEN, None)]  # the token's one served organisation, though it sees two
    assert served.status_code == 200
    (data,) = [line.removeprefix("data: ") for line in served.text.splitlines() if line.startswith("data: ")]
    assert 'acts in organisation 1 ("Sandbox Org")' in json.loads(data)["result"]["instructions"]


@pytest.mark.anyio
async def test_over_stdio_the_operators_narrowing_and_the_tokens_only_organisation(sandbox: SandboxServer) -> None:
    env = sandbox_env(sandbox, AGENT_AUTOMATION_API_TOKEN=SOLO, AGENT_AUTOMATION_ORG_ID=None)
    async with Client(stdio_server(env, "--read-only", "--toolsets", "all")) as client:
        reading = await told(client)
    async with Client(stdio_server(env, "--toolsets", "runs")) as client:
        runs = await told(client)
    for seen in (reading, runs):
        assert_names_only_what_is_offered(seen)
        assert 'This connection acts in organisation 1 ("Sandbox Org")' in seen["instructions"]
    assert "create_agent_run" not in reading["instructions"] and "delegate_task" in reading["refused"]
    assert "Read-only: no tool here changes anything" in reading["instructions"]
    assert "get_agent_run_logs" not in (runs["tools"]["create_agent_run"].description or "")
    assert "Toolsets off on this server: logs" in runs["instructions"]
