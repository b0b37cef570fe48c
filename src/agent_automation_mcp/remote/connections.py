"""How many HTTP requests and streams a replica holds now: the gauges that show one client holding too many.

Every request counts while it is served (a tool call's whole wait included); an answer sent as a stream (SSE: a
call's progress and its result) counts as a stream too, until it ends. Listening `GET /mcp` streams are refused
(remote/gate.py), so each stream here belongs to one call, bounded by the call's deadline.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..headers import header_dict
from .metrics import Metrics


class OpenConnections:
    """ASGI middleware around the whole app: `agent_automation_open_connections` and `..._open_streams`."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        streaming = False

        async def sending(message: Message) -> None:
            nonlocal streaming
            if message["type"] == "http.response.start" and header_dict(message.get("headers", [])).get(
                    "content-type", "").startswith("text/event-stream"):
                streaming = True
                self.metrics.open_streams.inc()
            await send(message)

        self.metrics.open_connections.inc()
        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.open_connections.dec()
            if streaming:
                self.metrics.open_streams.dec()
