"""An ASGI app served in the test's own process: uvicorn with the server's HTTP parser, on a free loopback port."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
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
