"""Traces over real HTTP: the server exports to an OTLP receiver on loopback, and one tool call is one trace that
continues the caller's and goes on into the service (the sandbox records the `traceparent` it received)."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Iterator
from typing import Any, Final

import anyio
import httpx2
import pytest
from harness import RATE_LIMITS, SHARED_KEYS, HttpServer, clean_env
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitRequestParams, ElicitResult
from otlp_receiver import OtlpReceiver, Received, otlp_receiver

from agent_automation_mcp.api.credentials import Credentials
from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from pacing.redis_server import RedisServer, running_redis

TOKEN: Final = "tok-traced-tenant-0d5c"
SECRET: Final = "a-log-secret-for-the-trace-tests"
USER_ID: Final = 987_654_321  # a query value: it goes to the service and never into a span
# The caller's span, as a W3C traceparent: version, trace id, span id, sampled.
TRACE_ID, CALLER_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
TRACEPARENT: Final = f"00-{TRACE_ID}-{CALLER_SPAN}-01"
META_TRACE, META_SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
SLOT_TRACE: Final = "5b8efff798038103d269b633813fc60c"
LOCAL_TRACE: Final = "7d3c1a9e5f2b4c6d8e0f1a2b3c4d5e6f"
FLOOD_TRACE: Final = "1e2d3c4b5a69788796a5b4c3d2e1f001"
UNSAMPLED_TRACE: Final = "2f3e4d5c6b7a8998a7b6c5d4e3f20102"
LONG: Final = 100_000  # characters of a tool name and of an id: far past any, well within the body cap


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(tokens=(TOKEN,), rate_limits=parse_rate_limits(RATE_LIMITS))) as server:
        yield server


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with otlp_receiver() as running:
        yield running


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


@pytest.fixture(scope="module")
def traced(sandbox: SandboxServer, receiver: OtlpReceiver, redis: RedisServer) -> Iterator[HttpServer]:
    """The server with the standard variables pointing at the receiver, pacing through Redis."""
    env = clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS,
                    AGENT_AUTOMATION_REDIS_URL=redis.url,
                    AGENT_AUTOMATION_TOOLSETS="all", **{**SHARED_KEYS, "AGENT_AUTOMATION_LOG_SECRET": SECRET},
                    OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_SERVICE_NAME="mcp-under-test",
                    OTEL_TRACES_SAMPLER="parentbased_always_on", OTEL_BSP_SCHEDULE_DELAY="50")
    for name in ("OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        env.pop(name, None)
    # One call in flight per token: a second waits for the first, in a span of its own.
    server = HttpServer(env, "--auth", "request", "--log-format", "json", "--max-tenant-calls", "1")
    yield server
    if server.process.returncode is None:  # the last test stops it to read its lines
        server.stop()


def client(url: str, **headers: str) -> Client:
    async def confirm(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"confirm": True})

    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}", **headers}, timeout=30)
    return Client(streamable_http_client(url, http_client=http), elicitation_callback=confirm)


def whole(trace_id: str, caller: str, name: str) -> Callable[[list[Received]], bool]:
    """Whether the trace holds a span named `name` and every span's parent: a span is exported when it ends, so
    the outer ones come last, perhaps in a later batch."""
    def found(spans: list[Received]) -> bool:
        mine = [span for span in spans if span.trace_id == trace_id]
        ids = {span.span_id for span in mine} | {caller}
        return any(span.name == name for span in mine) and all(span.parent_id in ids for span in mine)
    return found


def one(spans: list[Received], name: str, **where: Any) -> Received:
    (found,) = [span for span in spans if span.name == name
                and all(getattr(span, key) == value for key, value in where.items())]
    return found


def children(spans: list[Received], parent: Received) -> list[str]:
    return sorted(span.name for span in spans if span.parent_id == parent.span_id)


@pytest.mark.anyio
async def test_a_tool_call_is_one_trace_from_the_callers_traceparent_into_the_service(
        traced: HttpServer, receiver: OtlpReceiver, sandbox: SandboxServer) -> None:
    server = traced
    async with client(server.url, traceparent=TRACEPARENT) as session:
        result = await session.call_tool("list_agent_runs", {"user_id": USER_ID, "limit": 5})
    assert not result.is_error, result
    upstream = "GET /v1/organizations/{org_id}/agent/runs"
    spans = receiver.wait_for(whole(TRACE_ID, CALLER_SPAN, upstream))
    mine = [span for span in spans if span.trace_id == TRACE_ID]

    # The SDK's span for the call sits in our span for its HTTP request, which continues the caller's span.
    call = one(mine, "tools/call list_agent_runs")
    request = one(mine, "POST /mcp", span_id=call.parent_id)
    assert request.kind == "server" and request.parent_id == CALLER_SPAN
    assert request.attributes["http.response.status_code"] == 200
    key = Credentials(TOKEN).token_key
    assert request.attributes["agent_automation.tenant"] == hmac.new(
        SECRET.encode(), key.encode(), hashlib.sha256).hexdigest()[:16]
    assert children(mine, request) == ["gate", "tools/call list_agent_runs"]
    gate = one(mine, "gate", parent_id=request.span_id)
    assert gate.attributes["agent_automation.gate.status"] == 200
    check = one(mine, "gate token check", parent_id=gate.span_id)
    assert check.attributes == {"agent_automation.token.asked": False, "agent_automation.token.verdict": "accepted"}
    # The token's first request (the client's first, in the same trace) asked the service, from the strangers' budget.
    (asked,) = [span for span in mine if span.attributes.get("agent_automation.token.asked")]
    assert children(mine, asked) == ["GET /v1/users/me", "gate strangers budget", "pacing wait"]

    # Inside the call: the organisation looked up once, then the pacing wait (in Redis) and the request for the runs.
    waits = [span for span in mine if span.name == "pacing wait" and span.parent_id == call.span_id]
    assert waits and all(span.attributes["agent_automation.pacing.ledger"] == "shared"
                         and span.attributes["agent_automation.pacing.wait_seconds"] >= 0
                         and span.attributes["agent_automation.pacing.buckets"] == ["standard"] for span in waits)
    sent = one(mine, upstream, parent_id=call.span_id)
    assert sent.kind == "client" and not sent.error
    assert sent.attributes == {"http.request.method": "GET", "url.template": "/v1/organizations/{org_id}/agent/runs",
                               "agent_automation.operation": "list_agent_runs", "http.response.status_code": 200,
                               "agent_automation.outcome": "answered"}
    assert sent.resource["service.name"] == "mcp-under-test"

    # The service received the upstream span's own context: the trace goes on there.
    log = httpx2.get(f"{sandbox.url}/_sandbox/requests", params={"operation": "list_agent_runs"}).json()
    assert [record["traceparent"] for record in log] == [f"00-{TRACE_ID}-{sent.span_id}-01"]
    assert str(USER_ID) in log[0]["query"]  # the value was sent...

    # ...and never exported: nor the token, nor its plain hash.
    for body in receiver.exports:
        for secret in (TOKEN.encode(), key.encode(), str(USER_ID).encode()):
            assert secret not in body


@pytest.mark.anyio
async def test_a_traceparent_in_meta_is_continued_and_the_confirmation_is_a_span(
        traced: HttpServer, receiver: OtlpReceiver, sandbox: SandboxServer) -> None:
    """MCP clients carry trace context in `params._meta` (the SDK's own client does); the confirmation's
    round trip is in the same trace."""
    server = traced
    meta = {"traceparent": f"00-{META_TRACE}-{META_SPAN}-01"}
    async with client(server.url) as session:
        result = await session.call_tool("delete_webhook", {}, meta=meta)
    assert not result.is_error, result
    spans = receiver.wait_for(whole(META_TRACE, META_SPAN, "confirmation"))
    mine = [span for span in spans if span.trace_id == META_TRACE]
    calls = [span for span in mine if span.name == "tools/call delete_webhook"]
    assert calls and all(span.parent_id == META_SPAN for span in calls)
    requests = [span for span in mine if span.name == "POST /mcp"]
    assert len(requests) == len(calls) and all(span.parent_id == META_SPAN for span in requests)
    confirmation = one(mine, "confirmation")
    assert confirmation.parent_id in {span.span_id for span in calls}
    assert confirmation.attributes == {"gen_ai.tool.name": "delete_webhook",
                                       "agent_automation.confirmation.answer": "confirmed"}
    sent = one(mine, "DELETE /v1/organizations/{org_id}/webhooks/agent-run")
    assert sent.kind == "client" and sent.parent_id in {span.span_id for span in calls}
    log = httpx2.get(f"{sandbox.url}/_sandbox/requests", params={"operation": "delete_webhook"}).json()
    assert [record["traceparent"] for record in log] == [f"00-{META_TRACE}-{sent.span_id}-01"]


@pytest.mark.anyio
async def test_a_call_over_the_tenants_cap_shows_its_wait_for_a_slot(traced: HttpServer,
                                                                     receiver: OtlpReceiver) -> None:
    async with client(traced.url, traceparent=f"00-{SLOT_TRACE}-{CALLER_SPAN}-01") as session:
        run = await session.call_tool("create_agent_run", {"prompt": "Hold the slot"})
        waiting = {"agent_run_id": run.structured_content["id"], "wait_seconds": 1}  # the run takes 20 s
        async with anyio.create_task_group() as group:
            for _ in range(2):
                group.start_soon(session.call_tool, "get_agent_run", waiting)
    spans = receiver.wait_for(lambda got: sum(s.name == "tools/call get_agent_run" and s.trace_id == SLOT_TRACE
                                              for s in got) == 2)
    calls = [span for span in spans if span.name == "tools/call get_agent_run"]
    (wait,) = [span for span in spans if span.name == "tenant slot wait" and span.trace_id == SLOT_TRACE]
    assert wait.parent_id in {call.span_id for call in calls}
    assert wait.attributes == {"agent_automation.tenant_slots.limit": 1} and not wait.error


@pytest.mark.anyio
async def test_a_pacing_wait_says_local_while_redis_is_down(traced: HttpServer, receiver: OtlpReceiver,
                                                          redis: RedisServer) -> None:
    redis.stop()
    try:
        async with client(traced.url, traceparent=f"00-{LOCAL_TRACE}-{CALLER_SPAN}-01") as session:
            result = await session.call_tool("list_agent_runs", {"limit": 1})
    finally:
        redis.start()
    assert not result.is_error, result
    spans = receiver.wait_for(whole(LOCAL_TRACE, CALLER_SPAN, "tools/call list_agent_runs"))
    (call,) = [span for span in spans if span.name == "tools/call list_agent_runs" and span.trace_id == LOCAL_TRACE]
    waits = [span for span in spans if span.name == "pacing wait" and span.parent_id == call.span_id]
    assert waits and all(span.attributes["agent_automation.pacing.ledger"] == "local" for span in waits)


def raw_call(url: str, body: bytes | dict[str, Any], **headers: str) -> httpx2.Response:
    sent = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json",
            "accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25", **headers}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx2.post(url, content=content, headers={k: v for k, v in sent.items() if v}, timeout=30)


def test_a_flood_of_huge_tool_names_and_ids_is_refused_and_no_span_holds_them(
        traced: HttpServer, receiver: OtlpReceiver) -> None:
    """100 such calls once took a replica from 100 MB to 970 MB: the SDK named its span after the tool as sent, put
    the id in an attribute and the name again in the status, and the exporter's batch grew to 184 MB."""
    huge = {"jsonrpc": "2.0", "id": "7" * LONG, "method": "tools/call",
            "params": {"name": "x" * LONG, "arguments": {}}}
    answers = [raw_call(traced.url, message, traceparent=f"00-{FLOOD_TRACE}-{CALLER_SPAN}-01") for message in (
        huge, {**huge, "id": 1}, {**huge, "params": {"name": "list_models", "arguments": {}}})]
    for answer in answers:
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["kind"] == "bad_request" and error["data"]["hint"]
    assert "the tool name is 100,000 characters long" in answers[1].json()["error"]["data"]["message"]
    assert "the JSON-RPC id is 100,000 characters long" in answers[2].json()["error"]["data"]["message"]
    spans = receiver.wait_for(lambda got: sum(s.name == "POST /mcp" and s.trace_id == FLOOD_TRACE for s in got) == 3)
    mine = [span for span in spans if span.trace_id == FLOOD_TRACE]
    # The caller is known before the body is read; the SDK never saw them.
    assert sorted({span.name for span in mine}) == ["POST /mcp", "gate", "gate token check"]
    assert all(span.attributes.get("agent_automation.gate.status") == 400 for span in mine if span.name == "gate")
    assert not any(b"x" * 1000 in body or b"7" * 1000 in body for body in receiver.exports)


def test_a_callers_sampled_flag_decides_nothing_its_trace_id_is_kept(traced: HttpServer,
                                                                    receiver: OtlpReceiver) -> None:
    """The server samples every trace here (parentbased_always_on); a caller's `-00` once switched it off, as its
    `-01` switched on a server that samples few."""
    answer = raw_call(traced.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                   "params": {"name": "list_models", "arguments": {}}},
                      traceparent=f"00-{UNSAMPLED_TRACE}-{CALLER_SPAN}-00")
    assert answer.status_code == 200
    spans = receiver.wait_for(whole(UNSAMPLED_TRACE, CALLER_SPAN, "tools/call list_models"))
    request = one(spans, "POST /mcp", trace_id=UNSAMPLED_TRACE)
    assert request.parent_id == CALLER_SPAN


def test_a_strangers_nested_body_that_mentions_traceparent_is_refused_not_a_500(traced: HttpServer) -> None:
    answer = raw_call(traced.url, b"[" * 100_000 + b'{"traceparent": 1}', authorization="")
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"]["kind"] == "unauthorized"


def test_access_lines_lead_to_their_traces(traced: HttpServer, receiver: OtlpReceiver) -> None:
    """Last in the module: it stops the server to read every line it wrote."""
    server = traced
    answer = httpx2.post(server.url, headers={
        "authorization": f"Bearer {TOKEN}", "content-type": "application/json", "traceparent": TRACEPARENT,
        "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/list"}, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}}, timeout=30)
    assert answer.status_code == 200
    request_id = answer.headers["x-request-id"]
    receiver.wait_for(lambda got: any(s.attributes.get("agent_automation.request_id") == request_id for s in got))
    text = server.stop()
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    (line,) = [line for line in lines if line.get("request_id") == request_id and line.get("event") == "access"]
    assert line["trace_id"] == TRACE_ID
    assert TOKEN not in text
