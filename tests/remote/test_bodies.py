"""Reading a request's body: handed on unchanged, within a deadline (408) and a size cap (413) on every endpoint
that reads one, and within the replica's bound on body bytes held at once, given back when the request ends.
Over real HTTP, with the server's own HTTP parser."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
import httpx2
import pytest
from served_app import body_never_whole, served
from starlette.types import Receive, Scope, Send

from agent_automation_mcp.remote import bodies
from agent_automation_mcp.remote.bodies import Body, BodyBytes, read_body, read_within
from agent_automation_mcp.remote.refusals import Refused, respond

MAX_BODY = 4096


async def echo(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers the body it received."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", str(len(body))
                                                                            .encode())]})
    await send({"type": "http.response.body", "body": body})


@pytest.mark.anyio
async def test_a_sign_in_endpoints_body_is_handed_on_whole_or_answered_408_or_413(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bodies, "BODY_SECONDS", 0.5)
    async with served(read_within(echo, MAX_BODY)) as port:
        async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            sent = json.dumps({"client_name": "x" * 1000})
            assert (await http.post("/register", content=sent)).text == sent
            assert (await http.post("/register", content="x" * (MAX_BODY + 1))).status_code == 413
            async def chunks() -> AsyncIterator[bytes]:  # chunked: no Content-Length to refuse it by
                for _ in range(MAX_BODY // 1024 + 1):
                    yield b"x" * 1024

            assert (await http.post("/register", content=chunks())).status_code == 413
        slow = await body_never_whole(port, "/register")
    assert slow.status_code == 408 and slow.headers["connection"].lower() == "close"
    error = slow.json()["error"]
    assert error["kind"] == "timeout" and "did not arrive within" in error["message"]


@pytest.mark.anyio
async def test_bodies_held_at_once_are_bounded_and_given_back_when_the_request_ends() -> None:
    held = BodyBytes(3 * 1000)
    finish = anyio.Event()
    reading: list[Body] = []

    async def holding(scope: Scope, receive: Receive, send: Send) -> None:
        body = await read_body(scope, receive, MAX_BODY, held)
        if isinstance(body, Refused):
            await respond(send, body)
            return
        reading.append(body)
        try:
            await finish.wait()
            await echo(scope, body.receive, send)
        finally:
            held.give_back(body.held)

    async with served(holding) as port, httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        answers: list[httpx2.Response] = []

        async def post() -> None:
            answers.append(await http.post("/mcp", content=b"x" * 1000))

        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(post)
            with anyio.fail_after(10):
                while len(reading) < 3:
                    await anyio.sleep(0.01)
            refused = await http.post("/mcp", content=b"y" * 1000)  # a fourth does not fit while three are held
            finish.set()
        assert held.held == 0
        again = await http.post("/mcp", content=b"z" * 1000)
    assert [answer.text for answer in answers] == ["x" * 1000] * 3 and again.text == "z" * 1000
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["message"].startswith("This replica holds as many request bodies as it takes")
