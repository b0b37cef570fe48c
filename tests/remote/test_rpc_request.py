"""A `/mcp` POST's body, read for its few members by a bounded parser: what it finds is what a JSON parser finds,
whatever the body holds it builds nothing of the rest, and a body it cannot read in its steps is named so."""

from __future__ import annotations

import json
import random
import tracemalloc
from typing import Any

import pytest

from agent_automation_mcp.remote.rpc_request import MAX_ID_CHARS, MAX_STEPS, RpcRequest

LIST = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'


def test_what_each_layer_asks_is_read_once() -> None:
    call = RpcRequest.read(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "list_models", "_meta": {"traceparent": "00-a-b-01", "other": [1]}}}).encode())
    assert (call.method, call.called_tool, call.trace, call.quoted()) == (
        "tools/call", "list_models", {"traceparent": "00-a-b-01"}, ("tools/call", "list_models"))
    assert call.overlong(len("list_models")) is None
    assert RpcRequest.read(b"[" * 100_000 + b'"traceparent"').quoted() == ("batch", None)  # the SDK answers it
    assert RpcRequest.read(b'{"jsonrpc": "2.0", "id": 1, "result": {}}').quoted() == ("response", None)
    assert RpcRequest.read(b'{"method": "tools/list", "id": ').quoted() == ("unreadable", None)
    assert RpcRequest.read(b"").quoted() == (None, None)


def test_a_member_named_with_escapes_or_repeated_reads_as_a_json_parser_reads_it() -> None:
    """What the gate checks (the method a budget counts, the tool a read-only sign-in may not call) is what the SDK
    will act on: a name spelt with escapes is the same name, and the last of a repeated member counts."""
    escaped = RpcRequest.read(b'{"m\\u0065thod": "tasks/get", "params": {"n\\u0061me": "a", "name": "delete_webhook"}}')
    assert (escaped.method, escaped.name) == ("tasks/get", "delete_webhook")
    repeated = RpcRequest.read(b'{"method": "ping", "method": "tools/call", "params": {"name": "x"}, "params": {}}')
    assert (repeated.method, repeated.name) == ("tools/call", None)


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 5 or roll < 0.35:
        return rng.choice([0, -2.5e3, 10 ** 30, True, None, "", "é\u2028\"\\", "tools/call", "_meta"])
    if roll < 0.65:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(["a", "name", "method", "_meta", "traceparent", "é"]): _value(rng, depth + 1)
            for _ in range(rng.randint(0, 4))}


def test_what_it_reads_of_random_messages_is_what_json_loads_reads() -> None:
    rng = random.Random(45)
    for _ in range(2000):
        params = {key: _value(rng) for key in rng.sample(["name", "arguments", "_meta", "cursor"], rng.randint(0, 4))}
        if rng.random() < 0.5:
            params["_meta"] = {"traceparent": rng.choice(["00-a-b-01", 7]), "x": _value(rng)}
        message = {key: value for key, value in (("jsonrpc", "2.0"), ("id", _value(rng)), ("method", _value(rng)),
                                                 ("params", params if rng.random() < 0.8 else _value(rng)))
                   if rng.random() < 0.9}
        body = json.dumps(message, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 0, 2])).encode()
        read, parsed = RpcRequest.read(body), json.loads(body)
        method = parsed.get("method")
        got_params = parsed.get("params") if isinstance(parsed.get("params"), dict) else {}
        name = got_params.get("name")
        meta = got_params.get("_meta") if isinstance(got_params.get("_meta"), dict) else {}
        assert read.method == (method if isinstance(method, str) else None), body
        assert read.name == (name if isinstance(name, str) else None), body
        assert read.trace == {k: v for k, v in meta.items() if k in ("traceparent", "tracestate")
                              and isinstance(v, str)}, body


def test_reading_a_body_builds_nothing_of_what_it_skips() -> None:
    """A megabyte of empty objects is a quarter of a million dicts to `json.loads` (25 MB); read here, it costs a
    few kilobytes, wherever in the message it sits."""
    flood = b"[" + b"{}," * 300_000 + b"{}]"
    bodies = [b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_models", '
              b'"arguments": {"x": ' + flood + b'}}}', b'{"x": ' + flood + b', "method": "tools/list"}',
              b'{"params": {"_meta": {"x": ' + flood + b', "traceparent": "00-a-b-01"}}, "id": 1}']
    for body in bodies:
        tracemalloc.start()
        try:
            read = RpcRequest.read(body)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert read.kind == "message" and peak < 64 * 1024, (read, peak)


@pytest.mark.parametrize("body", [
    b'{"method": "tools/call", "params": {"arguments": [' + b"[[[[1]]]]," * 30_000 + b"1]}}",
    b'{"params": {' + b'"\\u0061": 1, ' * 30_000 + b'"name": "x"}}',
])
def test_a_body_past_the_parsers_steps_is_refused_as_no_client_sends_it(body: bytes) -> None:
    read = RpcRequest.read(body)
    refused = read.overlong(40)
    assert read.kind == "intricate" and refused is not None
    assert f"takes more than {MAX_STEPS:,} steps to read" in refused[0]


def test_a_method_name_or_id_longer_than_any_known_is_named_with_what_to_send() -> None:
    def overlong(**message: Any) -> str:
        found = RpcRequest.read(json.dumps({"jsonrpc": "2.0", **message}).encode()).overlong(20)
        assert found is not None
        return found[0]

    assert overlong(id=1, method="tools/call", params={"name": "x" * 21}).startswith("the tool name is 21 characters")
    assert overlong(id=1, method="ping", params={"name": "x" * 500}).startswith("params.name is 500 characters")
    assert overlong(id="i" * (MAX_ID_CHARS + 1), method="ping").startswith("the JSON-RPC id is 129 characters")
    assert overlong(id=10 ** 200, method="ping").startswith("the JSON-RPC id is 201 characters")
    assert overlong(id=1, method="m" * 65).startswith("the JSON-RPC method is 65 characters")
    assert overlong(id=1, method="tools/call", params={"name": "é" * 100_000}).startswith(
        "the tool name is 100,000 characters")
    assert RpcRequest.read(json.dumps({"id": "i" * MAX_ID_CHARS, "method": "ping"}).encode()).overlong(20) is None
    assert RpcRequest.read(LIST).overlong(20) is None
