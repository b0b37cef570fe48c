"""The one ASGI wrapper shape: an HTTP request reaches the wrapper's `serve`, which sees the answer go out (and may add
to its headers); anything else reaches the wrapped app untouched."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from served_app import served
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_automation_mcp.remote.middleware import HttpMiddleware, ResponseStart, watching


async def streamed(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers in two parts, as a streamed (SSE) answer comes."""
    if scope["type"] != "http":
        scope["reached"] = True
        return
    await send({"type": "http.response.start", "status": 201, "headers": [(b"content-type", b"text/plain"),
                                                                          (b"connection", b"keep-alive")]})
    await send({"type": "http.response.body", "body": b"first ", "more_body": True})
    await send({"type": "http.response.body", "body": b"second"})


class Noting(HttpMiddleware):
    def __init__(self, app: ASGIApp) -> None:
        super().__init__(app)
        self.seen: list[Any] = []

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        def started(start: ResponseStart) -> None:
            self.seen.append((start.status, start.headers.get("content-type")))
            start.append("x-noted", "yes")
            start.replace("connection", "close")

        await self.app(scope, receive, watching(send, started, self.seen.append))


@pytest.mark.anyio
async def test_a_wrapper_sees_the_answer_go_out_and_adds_to_its_headers() -> None:
    wrapper = Noting(streamed)
    async with served(wrapper) as port, httpx2.AsyncClient() as http:
        answer = await http.get(f"http://127.0.0.1:{port}/")
    assert (answer.status_code, answer.text) == (201, "first second")
    assert (answer.headers["x-noted"], answer.headers["connection"]) == ("yes", "close")
    assert wrapper.seen == [(201, "text/plain"), b"first ", b"second"]


@pytest.mark.anyio
async def test_what_is_not_an_http_request_passes_straight_through() -> None:
    wrapper = Noting(streamed)
    lifespan: dict[str, Any] = {"type": "lifespan"}

    async def nothing() -> dict[str, Any]:
        return {}

    async def unsent(message: Any) -> None:
        raise AssertionError(f"sent {message}")

    await wrapper(lifespan, nothing, unsent)
    assert lifespan.get("reached") and wrapper.seen == []
