"""A `/mcp` POST's body, read once in front of the SDK: handed on unchanged, parsed for the gate, the trace context
and the access line, and answered 408 when it does not arrive in time."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
import pytest
from served_app import served
from starlette.types import Receive, Scope, Send

from agent_automation_mcp.remote import rpc_request
from agent_automation_mcp.remote.access import AccessLog
from agent_automation_mcp.remote.metrics import Metrics
from agent_automation_mcp.remote.rpc_request import MAX_ID_CHARS, RpcRequest, read_request

MAX_BODY = 4096


def test_a_body_is_parsed_once_for_what_each_layer_asks() -> None:
    call = RpcRequest.parse(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "list_models", "_meta": {"traceparent": "00-a-b-01"}}}).encode())
    assert (call.method, call.called_tool, call.meta, call.quoted()) == (
        "tools/call", "list_models", {"traceparent": "00-a-b-01"}, ("tools/call", "list_models"))
    assert call.overlong(len("list_models")) is None
    nested = RpcRequest.parse(b"[" * 100_000 + b'"traceparent"')  # past the parser's depth
    assert (nested.quoted(), nested.meta, nested.overlong(1)) == (("unreadable", None), None, None)
    assert RpcRequest.parse(b"[1]").quoted() == ("batch", None)
    assert RpcRequest.parse(b'{"jsonrpc": "2.0", "id": 1, "result": {}}').quoted() == ("response", None)


def test_a_method_name_or_id_longer_than_any_known_is_named_with_what_to_send() -> None:
    def overlong(**message: Any) -> str:
        found = RpcRequest.parse(json.dumps({"jsonrpc": "2.0", **message}).encode()).overlong(20)
        assert found is not None
        return found[0]

    assert overlong(id=1, method="tools/call", params={"name": "x" * 21}).startswith("the tool name is 21 characters")
    assert overlong(id=1, method="ping", params={"name": "x" * 500}).startswith("params.name is 500 characters")
    assert overlong(id="i" * (MAX_ID_CHARS + 1), method="ping").startswith("the JSON-RPC id is 129 characters")
    assert overlong(id=10 ** 200, method="ping").startswith("the JSON-RPC id is 201 characters")
    assert overlong(id=1, method="m" * 65).startswith("the JSON-RPC method is 65 characters")
    assert RpcRequest.parse(json.dumps({"id": "i" * MAX_ID_CHARS, "method": "ping"}).encode()).overlong(20) is None


async def echo(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers the body it received and what the reading found in it."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    request = read_request(scope)
    answer = json.dumps({"body": body.decode(), "method": request.method if request else None}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", str(len(answer))
                                                                            .encode())]})
    await send({"type": "http.response.body", "body": answer})


@pytest.mark.anyio
async def test_a_body_reaches_the_app_unchanged_and_a_slow_one_is_answered_408(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rpc_request, "BODY_SECONDS", 0.5)
    async with served(AccessLog(echo, Metrics(), max_body_bytes=MAX_BODY)) as port:
        async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            sent = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert (await http.post("/mcp", content=sent)).json() == {"body": sent, "method": "tools/list"}
            big = "x" * (MAX_BODY * 3)  # past the cap: handed on as it comes, unparsed (the SDK answers 413)
            assert (await http.post("/mcp", content=big)).json() == {"body": big, "method": None}
        slow = await anyio.connect_tcp("127.0.0.1", port)
        await slow.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 100\r\n\r\n{\"jsonrpc\":")  # and never the rest
        with anyio.fail_after(10):  # without the deadline it is held until the server stops
            head = await slow.receive()
        assert head.startswith(b"HTTP/1.1 408") and b"connection: close" in head.lower()
        body = json.loads(head.partition(b"\r\n\r\n")[2])
        assert body["error"]["kind"] == "timeout" and "did not arrive within" in body["error"]["message"]
        await slow.aclose()
