"""The access line in the odd cases: a body nested past any parser's depth, a confirmation's first round, a legacy
request whose headers say otherwise than its body; and a body that never finishes arriving."""

from __future__ import annotations

import signal
import socket
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from harness import HttpServer, sandbox_env
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.types import ElicitRequestParams, ElicitResult

from agent_automation_mcp.sandbox import SandboxServer


@pytest.fixture
def server(sandbox: SandboxServer) -> Iterator[HttpServer]:
    server = HttpServer(sandbox_env(sandbox, AGENT_AUTOMATION_TOOLSETS="all"))  # --auth env, on loopback
    yield server
    if server.process.poll() is None:  # not stopped by the test
        server.stop()


def access_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "agent_automation_mcp.remote.access" in line]


def test_a_body_nested_past_the_parsers_depth_gets_an_access_line_and_no_traceback(server: HttpServer) -> None:
    answer = httpx2.post(server.url, content=b"[" * 400_000, timeout=30, headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream"})
    assert answer.status_code == 400
    stderr = server.stop()
    assert "Traceback" not in stderr and "RecursionError" not in stderr
    assert [line for line in access_lines(stderr) if "POST /mcp batch 400" in line]  # an array, to the bounded parser


@pytest.mark.anyio
async def test_a_confirmations_first_round_is_logged_paused_and_its_answer_ok(server: HttpServer) -> None:
    async def accept(context: ClientRequestContext, params: ElicitRequestParams) -> Any:
        return ElicitResult(action="accept", content={"confirm": True})

    async with Client(server.url, elicitation_callback=accept) as client:  # 2026-07-28: a round, then the answer
        assert not (await client.call_tool("delete_webhook", {})).is_error
    calls = [line for line in access_lines(server.stop()) if "tools/call delete_webhook" in line]
    assert len(calls) == 2 and " 200 paused " in calls[0] and " 200 ok " in calls[1], calls


def test_a_legacy_requests_line_names_what_its_body_asks_not_its_headers(server: HttpServer) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_models", "arguments": {}}}
    answer = httpx2.post(server.url, json=call, timeout=30, headers={
        "accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25",
        "mcp-method": "tools/list", "mcp-name": "get_user"})  # checked by nobody in this era
    assert answer.status_code == 200
    (line,) = access_lines(server.stop())
    assert "POST /mcp tools/call list_models 200 ok" in line, line


def test_a_body_that_never_arrives_does_not_hold_the_drain(sandbox: SandboxServer) -> None:
    """A request whose body is still coming is not in flight: SIGTERM ends the replica after its minimum drain, not
    its grace."""
    server = HttpServer(sandbox_env(sandbox), "--shutdown-grace", "8")
    with socket.create_connection((server.host, server.port), timeout=30) as slow:
        slow.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Accept: application/json, text/event-stream\r\nContent-Length: 200\r\n\r\n{")
        httpx2.get(f"{server.origin}/healthz", timeout=10)  # the partial request has reached the server by now
        server.process.send_signal(signal.SIGTERM)
        code = server.process.wait(timeout=30)
    stderr = server.stop()
    assert code == 0 and "SIGTERM: drained, exiting" in stderr and "still in flight" not in stderr, stderr[-2000:]
