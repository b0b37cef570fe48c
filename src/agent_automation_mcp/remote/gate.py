"""What every request to `/mcp` passes before the MCP SDK sees it: Host and Origin, draining, headers, the token.

Answers in the one error shape (`{"error": {"kind", "status", "message", "hint"}}`) so a person reading a
refusal in a client's log knows what to send instead.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ..headers import HeaderError, bearer_token, organization_id
from ..server import AgentAutomationServer
from ..tools.registry import narrowed
from .hosts import HostPolicy
from .strangers import OverBudget
from .verdicts import TokenVerdicts

REALM: Final = 'Bearer realm="agent-automation-mcp"'
REFUSED_REALM: Final = f'{REALM}, error="invalid_token"'
TOKEN_HINT: Final = ("Send Authorization: Bearer <your Codegen API token> (from https://codegen.com/token) with each "
                     "request, and X-Organization-Id: <id> if the token sees several organisations.")


@dataclass(slots=True)
class Lifecycle:
    """Where the replica is in its life, for `/readyz` and for refusing new work while it drains."""

    ready: bool = False
    draining: bool = False
    in_flight: int = 0  # `/mcp` requests being served

    @property
    def serving(self) -> bool:
        return self.ready and not self.draining


class McpGate:
    """An ASGI app in front of the SDK's Streamable HTTP handler."""

    def __init__(self, app: ASGIApp, server: AgentAutomationServer, policy: HostPolicy, lifecycle: Lifecycle, *,
                 per_request_auth: bool, verdicts: TokenVerdicts | None = None) -> None:
        self.app = app
        self.server = server
        self.policy = policy
        self.lifecycle = lifecycle
        self.per_request_auth = per_request_auth
        self.verdicts = verdicts or TokenVerdicts()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")  # the socket's peer, or what a trusted proxy says (--trusted-proxy)
        refusal = await self._refusal(Headers(scope=scope), client[0] if client else None)
        if refusal is not None:
            status, body, extra = refusal
            await _respond(send, status, body, extra)
            return
        self.lifecycle.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.lifecycle.in_flight -= 1

    async def _refusal(self, headers: Headers,
                       address: str | None) -> tuple[int, dict[str, Any], Mapping[str, str]] | None:
        refused = self.policy.refusal(headers.get("host"), headers.get("origin"))
        if refused is not None:
            kind = "forbidden" if refused.status == 403 else "misdirected"
            return refused.status, _error(kind, refused.status, refused.message, refused.hint), {}
        if not self.lifecycle.serving or self.server.state is None:
            what = "shutting down" if self.lifecycle.draining else "starting"
            return 503, _error("unavailable", 503, f"this replica is {what}", "Send the request again; another "
                               "replica (or this one, once started) will serve it."), {"Retry-After": "1"}
        try:
            narrowed(self.server.server_settings, headers)
            if self.per_request_auth:
                organization_id(headers)
        except HeaderError as exc:
            return 400, _error("bad_request", 400, str(exc), "Fix or leave out the header named in the message."), {}
        if not self.per_request_auth:
            return None
        token = bearer_token(headers)
        if token is None:
            return 401, _error("unauthorized", 401, "this server needs your own API token with each request",
                               TOKEN_HINT), {"WWW-Authenticate": REALM}
        try:
            accepted = await self.verdicts.accepted(self.server.state.transport, token, address)
        except OverBudget as exc:  # metrics: a request refused with 429
            wait = max(1, math.ceil(exc.retry_after))
            return 429, _error("rate_limited", 429, "too many unknown API tokens from this address (or from everyone) "
                               "were checked with the service in the last minute; this one was not checked yet",
                               "Send a valid API token; if it is yours, send the request again after "
                               "retry_after_seconds.", retry_after=wait), {"Retry-After": str(wait)}
        if not accepted:
            return 401, _error("unauthorized", 401, "the service refused this API token (invalid or revoked)",
                               "Create a new token at https://codegen.com/token and send it as "
                               "Authorization: Bearer <token>."), {"WWW-Authenticate": REFUSED_REALM}
        return None


def _error(kind: str, status: int, message: str, hint: str, *, retry_after: int | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"kind": kind, "status": status, "message": message}
    if retry_after is not None:
        error["retry_after_seconds"] = retry_after
    return {"error": {**error, "hint": hint}}


async def _respond(send: Send, status: int, body: dict[str, Any], headers: Mapping[str, str]) -> None:
    payload = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
           *((name.lower().encode(), value.encode()) for name, value in headers.items())]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})
