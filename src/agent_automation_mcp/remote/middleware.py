"""The one way this server writes an ASGI app around another: `HttpMiddleware` sends each HTTP request to the
wrapper's own `serve` and everything else (lifespan) straight through; `watching` shows the wrapper the answer on
its way out, and lets it add headers.

Pure ASGI, as starlette writes its own middleware: `BaseHTTPMiddleware` would run the app in a task of its own and
buffer what it sends, which a streamed answer (SSE) and the request's context variables must not meet.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..headers import header_dict


class HttpMiddleware:
    """An ASGI app around `app`; a subclass writes `serve`, which ends by calling `self.app` or answering itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.serve(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


class ResponseStart:
    """An answer's start on its way out: its status, its headers (read into a dict only when asked), and headers
    to add."""

    def __init__(self, message: Message) -> None:
        self.message = message
        self.status: int = message["status"]

    @cached_property
    def headers(self) -> dict[str, str]:
        return header_dict(self.message.get("headers", []))

    def append(self, name: str, value: str) -> None:
        self.message["headers"] = [*self.message.get("headers", []), (name.encode(), value.encode())]

    def replace(self, name: str, value: str) -> None:
        """`name` (lower case) once, as `value`, whatever the app sent for it."""
        kept = [(key, sent) for key, sent in self.message.get("headers", []) if key.lower() != name.encode()]
        self.message["headers"] = [*kept, (name.encode(), value.encode())]


def watching(send: Send, started: Callable[[ResponseStart], None],
             body: Callable[[bytes], None] | None = None) -> Send:
    """`send`, showing `started` the answer's start (which it may add headers to) and `body` each part of the
    answer's body, before they go on."""
    async def watched(message: Message) -> None:
        if message["type"] == "http.response.start":
            started(ResponseStart(message))
        elif body is not None:
            body(message.get("body", b""))
        await send(message)

    return watched
