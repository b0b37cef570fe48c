"""An ASGI app served in the test's own process: uvicorn with the server's HTTP parser, on a free loopback port."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx2
import uvicorn
from starlette.types import ASGIApp

from agent_automation_mcp.remote.serve import http_protocol


@asynccontextmanager
async def served(app: ASGIApp) -> AsyncIterator[int]:
    """The port `app` listens on, until the block ends."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, http=http_protocol(),
                                           log_config=None, access_log=False, lifespan="off"))
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.02)
        try:
            yield port
        finally:
            server.should_exit = True


async def body_never_whole(port: int, path: str, **headers: str) -> httpx2.Response:
    """The answer to a POST to `path` (with `headers`, e.g. `authorization=...`) whose body never comes whole: none
    within 10 s without a deadline for the body. Read off the wire, so the status line is checked here."""
    sent = "".join(f"{name.replace('_', '-')}: {value}\r\n" for name, value in headers.items())
    async with await anyio.connect_tcp("127.0.0.1", port) as connection:
        await connection.send(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{sent}Content-Type: application/json\r\n"
                              "Content-Length: 100\r\n\r\n{\"client_name\":".encode())  # and never the rest
        with anyio.fail_after(10):
            answer = await connection.receive()
    head, _, content = answer.partition(b"\r\n\r\n")
    status, *fields = head.decode("latin-1").split("\r\n")
    version, code, _ = status.split(" ", 2)
    assert version == "HTTP/1.1", status
    return httpx2.Response(int(code), headers=[field.split(": ", 1) for field in fields], content=content)
