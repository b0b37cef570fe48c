"""The HTTP server's parser, and its deadline for a request's headers."""

from __future__ import annotations

import platform
import sys

import anyio
import httpx2
import pytest
from served_app import served
from starlette.types import Receive, Scope, Send

from agent_automation_mcp.remote import deadlines
from agent_automation_mcp.remote.serve import http_protocol

CPYTHON = platform.python_implementation() == "CPython"


@pytest.mark.skipif(not CPYTHON, reason="httptools is a dependency on CPython")
def test_http_serving_parses_with_httptools() -> None:
    assert http_protocol() is deadlines.DeadlineProtocol


def test_http_serving_falls_back_to_h11_without_httptools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httptools", None)  # `import httptools` now raises ImportError
    assert http_protocol() == "h11"


async def hello(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.mark.anyio
@pytest.mark.skipif(not CPYTHON, reason="httptools is a dependency on CPython")
async def test_half_sent_requests_are_closed_and_whole_ones_served(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deadlines, "HEADER_SECONDS", 0.3)
    async with served(hello) as port:
        silent = await anyio.connect_tcp("127.0.0.1", port)  # opens and sends nothing
        half = await anyio.connect_tcp("127.0.0.1", port)
        await half.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl")  # never finishes
        with anyio.fail_after(10):  # without the deadline both are held until the server stops
            assert (await half.receive()).startswith(b"HTTP/1.1 408")
            assert (await silent.receive()).startswith(b"HTTP/1.1 408")
        async with httpx2.AsyncClient() as http:  # a whole request, kept alive past the deadline, is served
            assert (await http.get(f"http://127.0.0.1:{port}/")).text == "ok"
            await anyio.sleep(0.5)
            assert (await http.get(f"http://127.0.0.1:{port}/")).text == "ok"
        await half.aclose()
        await silent.aclose()


async def refuse_unread(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers without reading the body, as the gate answers a stranger."""
    await send({"type": "http.response.start", "status": 401, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"no"})


async def answer(connection: anyio.abc.SocketStream) -> bytes:
    with anyio.fail_after(10):
        return await connection.receive()


@pytest.mark.anyio
@pytest.mark.skipif(not CPYTHON, reason="httptools is a dependency on CPython")
async def test_the_rest_of_a_body_answered_unread_must_come_in_time_or_the_connection_closes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate answers before it reads a stranger's body; what is left of it is dropped as it comes, and a
    connection whose body keeps trickling in after its answer is closed, instead of held for good."""
    monkeypatch.setattr(deadlines, "BODY_SECONDS", 0.5)
    head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 300000\r\n\r\n"
    async with served(refuse_unread) as port:
        whole = await anyio.connect_tcp("127.0.0.1", port)
        await whole.send(head + b"x" * 1000)
        assert (await answer(whole)).startswith(b"HTTP/1.1 401")
        await whole.send(b"x" * 299_000)  # the rest, at once: dropped, and the connection carries the next request
        await whole.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert (await answer(whole)).startswith(b"HTTP/1.1 401")
        trickle = await anyio.connect_tcp("127.0.0.1", port)
        await trickle.send(head + b"x" * 1000)
        assert (await answer(trickle)).startswith(b"HTTP/1.1 401")
        with anyio.fail_after(10), pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError, OSError)):
            while True:  # a byte at a time, as long as the server keeps the connection
                await trickle.send(b"x")
                await anyio.sleep(0.1)
                with anyio.move_on_after(0.01):
                    await trickle.receive()
        await whole.aclose()
        await trickle.aclose()
