"""The HTTP server's parser, and its deadline for a request's headers."""

from __future__ import annotations

import platform
import sys

import anyio
import httpx2
import pytest
from served_app import served
from starlette.types import Receive, Scope, Send

from agent_automation_mcp.remote import header_deadline
from agent_automation_mcp.remote.serve import http_protocol

CPYTHON = platform.python_implementation() == "CPython"


@pytest.mark.skipif(not CPYTHON, reason="httptools is a dependency on CPython")
def test_http_serving_parses_with_httptools() -> None:
    assert http_protocol() is header_deadline.HeaderDeadlineProtocol


def test_http_serving_falls_back_to_h11_without_httptools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httptools", None)  # `import httptools` now raises ImportError
    assert http_protocol() == "h11"


async def hello(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.mark.anyio
@pytest.mark.skipif(not CPYTHON, reason="httptools is a dependency on CPython")
async def test_half_sent_requests_are_closed_and_whole_ones_served(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(header_deadline, "HEADER_SECONDS", 0.3)
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
