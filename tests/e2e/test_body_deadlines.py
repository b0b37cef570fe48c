"""Every endpoint that reads a body has a deadline for it: `/mcp` (once the caller is known) and each sign-in
endpoint answer 408 and close a connection whose body does not arrive within 10 s, where the sign-in endpoints once
held a body sent a byte every 5 s for good. Real HTTP against a server signing in with OAuth."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import anyio
import pytest
from harness import RATE_LIMITS, HttpServer, clean_env, free_port

from agent_automation_mcp.remote.bodies import BODY_SECONDS
from agent_automation_mcp.sandbox import SandboxServer

ENDPOINTS = ("/mcp", "/register", "/token", "/authorize", "/revoke")


@pytest.fixture(scope="module")
def server(sandbox: SandboxServer) -> Iterator[HttpServer]:
    port = free_port()
    server = HttpServer(clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS),
                        "--auth", "oauth", "--public-url", f"http://127.0.0.1:{port}", port=port)
    yield server
    server.stop()


async def trickled(server: HttpServer, path: str, token: str) -> tuple[bytes, float]:
    """What the server answers a POST to `path` whose body comes a byte every 2 s, and when."""
    async with await anyio.connect_tcp(server.host, server.port) as connection:
        await connection.send(f"POST {path} HTTP/1.1\r\nHost: {server.host}:{server.port}\r\n"
                              f"Authorization: Bearer {token}\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                              "Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n".encode())
        started = anyio.current_time()
        answer = b""

        async def trickle() -> None:
            with anyio.CancelScope() as scope, contextlib.suppress(anyio.BrokenResourceError, OSError):
                trickling.append(scope)  # ended when answered, or when the server has closed the connection
                for _ in range(30):  # bounded: 60 s
                    await connection.send(b"a")
                    await anyio.sleep(2)

        trickling: list[anyio.CancelScope] = []
        async with anyio.create_task_group() as group:
            group.start_soon(trickle)
            with anyio.fail_after(3 * BODY_SECONDS):  # without the deadline: held until the trickle ends
                answer = await connection.receive()
                seconds = anyio.current_time() - started
                with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):  # the rest, up to the close
                    while True:
                        answer += await connection.receive()
            trickling[0].cancel()
        return answer, seconds


@pytest.mark.anyio
async def test_every_endpoint_answers_a_body_that_does_not_arrive_408(server: HttpServer,
                                                                      sandbox: SandboxServer) -> None:
    answers: dict[str, tuple[bytes, float]] = {}

    async def one(path: str) -> None:
        answers[path] = await trickled(server, path, sandbox.token)

    async with anyio.create_task_group() as group:
        for path in ENDPOINTS:
            group.start_soon(one, path)
    for path, (answer, seconds) in answers.items():
        assert answer.startswith(b"HTTP/1.1 408") and b"connection: close" in answer.lower(), (path, answer[:300])
        assert seconds > BODY_SECONDS - 1, (path, seconds)  # at its deadline, not before (`fail_after`: not long after)
        error = json.loads(answer.partition(b"\r\n\r\n")[2])["error"]
        assert error["kind"] == "timeout" and "did not arrive within" in error["message"], path
