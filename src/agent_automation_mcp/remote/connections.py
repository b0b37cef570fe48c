"""How many HTTP requests and streams a replica holds now: the gauges that show one client holding too many.

Every request counts while it is served (a tool call's whole wait included); an answer sent as a stream (SSE: a
call's progress and its result) counts as a stream too, until it ends. Listening `GET /mcp` streams are refused
(remote/gate.py), so each stream here belongs to one call, bounded by the call's deadline.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from .metrics import Metrics
from .middleware import HttpMiddleware, ResponseStart, watching


class OpenConnections(HttpMiddleware):
    """ASGI middleware around the whole app: `agent_automation_open_connections` and `..._open_streams`."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        super().__init__(app)
        self.metrics = metrics

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        streaming = False

        def started(start: ResponseStart) -> None:
            nonlocal streaming
            if start.headers.get("content-type", "").startswith("text/event-stream"):
                streaming = True
                self.metrics.open_streams.inc()

        self.metrics.open_connections.inc()
        try:
            await self.app(scope, receive, watching(send, started))
        finally:
            self.metrics.open_connections.dec()
            if streaming:
                self.metrics.open_streams.dec()
