"""Every tenant request takes one path: task methods share a token's cap on requests in flight with its tool calls,
and are counted under their own method. Real HTTP on loopback through the gate, each request with its own bearer
token."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any, Final

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.server.transport_security import TransportSecuritySettings
from prometheus_client.parser import text_string_to_metric_families
from served_app import served

from agent_automation_mcp import server as server_module
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.remote.gate import Lifecycle, McpGate
from agent_automation_mcp.remote.hosts import HostPolicy
from agent_automation_mcp.remote.metrics import Metrics
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.server import build_server
from agent_automation_mcp.tasks import extension
from agent_automation_mcp.tools.callers import CALL_SECONDS, RequestCaller
from agent_automation_mcp.tools.errors import REFUSED
from task_requester import ListTasks, TaskResult, call_as_task, request

ALICE, BOB = "tok-alice-floods", "tok-bob-waits-for-nothing"
CAP: Final = 2  # Alice's requests in flight
HELD: Final = 6.0  # seconds each of tasks/result holds a slot (the run goes on far longer)
DEADLINE: Final = 1.0  # seconds a request waits for a slot before it is refused
FLOOD: Final = 4  # tasks/result requests past the cap
MAX_WAITS: Final = 200  # of 0.05 s


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    """The sample `/metrics` would serve for `name` with exactly `labels`, or None when there is none."""
    text = metrics.exposition("not configured").decode()
    found = [sample.value for family in text_string_to_metric_families(text) for sample in family.samples
             if sample.name == name and sample.labels == labels]
    return found[0] if found else None


@pytest.fixture
def sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(tokens=(ALICE, BOB), run_seconds=600)) as sandbox:
        yield sandbox


@asynccontextmanager
async def remote(sandbox: SandboxServer, metrics: Metrics) -> AsyncIterator[str]:
    """The server over Streamable HTTP (the SDK's app, stateless) behind the gate, which resolves each request's
    caller from its own token."""
    api = ApiSettings(base_url=sandbox.url)
    server = build_server(api, ServerSettings(), callers=RequestCaller(), max_tenant_calls=CAP, observer=metrics)
    server.streamable_http_app(stateless_http=True, transport_security=TransportSecuritySettings(
        enable_dns_rebinding_protection=False))
    gate = McpGate(server.session_manager.handle_request, server, HostPolicy.build("127.0.0.1", (), ()),
                   Lifecycle(ready=True), per_request_auth=True)
    async with server.session_manager.run(), served(gate) as port:
        yield f"http://127.0.0.1:{port}/mcp"


def tenant(url: str, token: str, sandbox: SandboxServer) -> Client:
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}", "x-organization-id": str(sandbox.org_id)},
                              timeout=httpx2.Timeout(30, read=60))
    return Client(streamable_http_client(url, http_client=http), mode="legacy")  # tasks/result is 2025-11-25's


@pytest.mark.anyio
async def test_a_flood_of_task_results_is_refused_past_the_tokens_cap_and_counted_by_method(
        sandbox: SandboxServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two tasks/result hold Alice's two slots; four more wait for one until their deadline and are refused, as
    her tool call is; Bob is served meanwhile. The deadline and the hold are shortened to seconds."""
    monkeypatch.setattr(server_module, "SLOT_RESERVE_SECONDS", CALL_SECONDS - DEADLINE)
    monkeypatch.setattr(extension, "RESULT_SECONDS", HELD)
    metrics = Metrics()
    held: list[Any] = []
    refused: list[MCPError] = []
    async with remote(sandbox, metrics) as url, tenant(url, ALICE, sandbox) as alice, \
            tenant(url, BOB, sandbox) as bob:
        task_id = (await call_as_task(alice, "create_agent_run", {"prompt": "take a while"}))["task"]["taskId"]

        async def result() -> None:
            try:
                await request(alice, TaskResult, task_id)
            except MCPError as exc:
                (refused if exc.error.code == REFUSED else held).append(exc)

        async with anyio.create_task_group() as group:
            for _ in range(CAP):
                group.start_soon(result)
            for _ in range(MAX_WAITS):  # both hold their slots before the flood comes
                if value(metrics, "agent_automation_task_requests_in_flight") == CAP:
                    break
                await anyio.sleep(0.05)
            for _ in range(FLOOD):
                group.start_soon(result)
            call = await alice.call_tool("list_models", {})  # a tool call waits behind the same cap
            theirs = await request(bob, ListTasks)  # another token is not held up
            served = await bob.call_tool("list_models", {})
    counted = {(method, outcome): value(metrics, "agent_automation_task_requests_total", method=method,
                                        outcome=outcome)
               for method, outcome in (("tasks/result", "rate_limited"), ("tasks/result", "still_working"),
                                       ("tasks/list", "ok"))}
    assert len(refused) == FLOOD and len(held) == CAP, (refused, held)
    error = refused[0].error.data["error"]
    assert error["kind"] == "rate_limited" and error["retry_after_seconds"] > 0 and "per-tenant cap (2)" in (
        error["message"])
    assert "[rate_limited]" in refused[0].error.message
    assert all(exc.error.code == extension.STILL_WORKING for exc in held)  # held to their end, then told so
    assert call.is_error and call.structured_content["error"]["kind"] == "rate_limited"
    assert not served.is_error and theirs.model_extra["tasks"] == []
    assert counted == {("tasks/result", "rate_limited"): FLOOD, ("tasks/result", "still_working"): CAP,
                       ("tasks/list", "ok"): 1}
    assert value(metrics, "agent_automation_task_request_duration_seconds_count", method="tasks/result") == FLOOD + CAP
    assert value(metrics, "agent_automation_task_requests_in_flight") == 0
    assert value(metrics, "agent_automation_tool_calls_total", tool="list_models", outcome="rate_limited") == 1

