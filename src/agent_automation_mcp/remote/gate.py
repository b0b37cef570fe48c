"""What every request to `/mcp` passes before the MCP SDK sees it: Host and Origin, draining, headers, the token.

Answers in the one error shape (`{"error": {"kind", "status", "message", "hint"}}`) so a person reading a
refusal in a client's log knows what to send instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ..headers import HeaderError, bearer_token, organization_id
from ..server import AgentAutomationServer
from ..tools.registry import narrowed
from .hosts import HostPolicy
from .verdicts import TokenVerdicts

if TYPE_CHECKING:  # the sign-in package is loaded only with --auth oauth
    from .oauth import SignIn

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
                 per_request_auth: bool, verdicts: TokenVerdicts | None = None, sign_in: SignIn | None = None) -> None:
        self.app = app
        self.server = server
        self.policy = policy
        self.lifecycle = lifecycle
        self.per_request_auth = per_request_auth
        self.verdicts = verdicts or TokenVerdicts()
        self.sign_in = sign_in  # --auth oauth: our access tokens, and 401s that point at the sign-in metadata
        self.realm = sign_in.challenge if sign_in is not None else REALM
        self.refused_realm = f'{sign_in.challenge}, error="invalid_token"' if sign_in is not None else REFUSED_REALM

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = await self._refusal(Headers(scope=scope), scope)
        if refusal is not None:
            status, body, extra = refusal
            await _respond(send, status, body, extra)
            return
        self.lifecycle.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.lifecycle.in_flight -= 1

    async def _refusal(self, headers: Headers, scope: Scope) -> tuple[int, dict[str, Any], Mapping[str, str]] | None:
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
        if token is not None and self.sign_in is not None and self.sign_in.owns(token):
            return await self.sign_in.admit(scope, token, self.server.state.transport, self.verdicts)
        if token is None:
            return 401, _error("unauthorized", 401, "this server needs your own API token with each request",
                               TOKEN_HINT), {"WWW-Authenticate": self.realm}
        if not await self.verdicts.accepted(self.server.state.transport, token):
            return 401, _error("unauthorized", 401, "the service refused this API token (invalid or revoked)",
                               "Create a new token at https://codegen.com/token and send it as "
                               "Authorization: Bearer <token>."), {"WWW-Authenticate": self.refused_realm}
        return None


def _error(kind: str, status: int, message: str, hint: str) -> dict[str, Any]:
    return {"error": {"kind": kind, "status": status, "message": message, "hint": hint}}


async def _respond(send: Send, status: int, body: dict[str, Any], headers: Mapping[str, str]) -> None:
    payload = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
           *((name.lower().encode(), value.encode()) for name, value in headers.items())]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})
