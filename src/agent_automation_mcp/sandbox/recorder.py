"""The outermost layer of the app: it records every API request and drops connections when a fault says so.

It sits outside Starlette's error middleware, because dropping a connection means sending nothing at all: the
answer is swallowed and the server's transport closed, so the client sees the connection end without a response.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .routes import DROP_KEY, FAULT_KEY, OPERATION_KEY, bearer_token
from .state import RequestRecord, SandboxState, token_hash

CONTROL_PREFIX = "/_sandbox/"


class ConnectionDropped(Exception):
    """Raised to the server when the sandbox cannot reach the connection to close it (a non-uvicorn server)."""


class RequestRecorder:
    def __init__(self, app: ASGIApp, state: SandboxState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(CONTROL_PREFIX):
            await self.app(scope, receive, send)
            return
        started = time.time()
        recorded = False

        def record(status: int | None) -> None:
            nonlocal recorded
            recorded = True
            headers = Headers(scope=scope)
            self.state.request_log.append(RequestRecord(
                time=started, method=scope["method"], path=scope["path"],
                query=scope.get("query_string", b"").decode("latin-1"), operation=scope.get(OPERATION_KEY),
                status=status, token_hash=token_hash(bearer_token(headers.get("authorization"))),
                fault=scope.get(FAULT_KEY), traceparent=headers.get("traceparent")))

        async def recording_send(message: Message) -> None:
            if scope.get(DROP_KEY):
                return
            if message["type"] == "http.response.start":
                record(message["status"])  # before the client can see the answer, so the log is never behind
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            if not recorded:
                record(None)  # dropped, or failed before answering
        if scope.get(DROP_KEY):
            _close_connection(send)


def _close_connection(send: Send) -> None:
    """Close the client's connection under uvicorn (its `send` is a method of the request cycle that owns it)."""
    cycle: Any = getattr(send, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if transport is None:
        raise ConnectionDropped("sandbox fault: connection dropped")
    transport.close()
    cycle.disconnected = True  # so the server neither answers 500 nor logs the unanswered request
