"""What every request to `/mcp` passes before the MCP SDK sees it: Host and Origin, draining, headers, the token.

Answers in the one error shape (`{"error": {"kind", "status", "message", "hint"}}`) so a person reading a
refusal in a client's log knows what to send instead.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import tracing
from ..config import DEFAULT_MAX_BODY_BYTES
from ..headers import HeaderError, bearer_token, organization_id
from ..server import AgentAutomationServer
from ..tools.registry import narrowed
from .access import rpc_names
from .budgets import OverBudget
from .hosts import HostPolicy
from .organizations import served_organization
from .refusals import Refused, error_body
from .scopes import READ_ONLY_GRANT
from .verdicts import TokenVerdicts

if TYPE_CHECKING:  # the sign-in package is loaded only with --auth oauth
    from .oauth import SignIn

REALM: Final = 'Bearer realm="agent-automation-mcp"'
REFUSED_REALM: Final = f'{REALM}, error="invalid_token"'
TOKEN_HINT: Final = ("Send Authorization: Bearer <your Codegen API token> (from https://codegen.com/token) with each "
                     "request, and X-Organization-Id: <id> if the token sees several organisations.")


DRAINING_MESSAGE: Final = "this replica is shutting down; the request reached no tool"
DRAINING_HINT: Final = ("Send the same request again: nothing was done, and another replica will serve it (a load "
                        "balancer may do so itself: manifests/haproxy).")


LISTEN_MESSAGE: Final = "this server is stateless: it never sends anything on a listening GET stream"
LISTEN_HINT: Final = ("Send requests with POST; answers, progress and questions come back on each POST's own "
                      "response (MCP clients carry on without the GET stream when they get 405).")


@dataclass(slots=True)
class Lifecycle:
    """Where the replica is in its life, for `/readyz` and for refusing new work while it drains; and what must end
    at once when it drains (listen streams, which would otherwise hold it for the whole grace)."""

    ready: bool = False
    draining: bool = False
    in_flight: int = 0  # `/mcp` requests being served
    on_drain: list[Callable[[], None]] = field(default_factory=list)  # called once, on the event loop

    @property
    def serving(self) -> bool:
        return self.ready and not self.draining


class McpGate:
    """An ASGI app in front of the SDK's Streamable HTTP handler."""

    def __init__(self, app: ASGIApp, server: AgentAutomationServer, policy: HostPolicy, lifecycle: Lifecycle, *,
                 per_request_auth: bool, verdicts: TokenVerdicts | None = None, sign_in: SignIn | None = None,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.server = server
        self.policy = policy
        self.lifecycle = lifecycle
        self.per_request_auth = per_request_auth
        self.verdicts = verdicts or TokenVerdicts()
        self.max_body_bytes = max_body_bytes
        self.sign_in = sign_in  # --auth oauth: our access tokens, and 401s that point at the sign-in metadata
        self.realm = sign_in.challenge if sign_in is not None else REALM
        self.refused_realm = f'{sign_in.challenge}, error="invalid_token"' if sign_in is not None else REFUSED_REALM

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.lifecycle.in_flight += 1  # from the start: a token check is part of the request a drain waits for
        try:
            with tracing.span("gate") as span:
                refusal = await self._refusal(Headers(scope=scope), scope)
                if refusal is None and scope.get("state", {}).get(READ_ONLY_GRANT):
                    refusal, receive = await self._read_only_refusal(scope, receive)
                tracing.note(span, {"agent_automation.gate.status": refusal[0] if refusal is not None else 200})
            if refusal is not None:
                status, body, extra = refusal
                await _respond(send, status, body, extra)
            else:
                await self.app(scope, receive, self._closing_when_draining(send))
        finally:
            self.lifecycle.in_flight -= 1

    def _closing_when_draining(self, send: Send) -> Send:
        """An answer given while the replica drains closes its connection, so no balancer reuses it for more."""
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and self.lifecycle.draining:
                kept = [(name, value) for name, value in message.get("headers", []) if name.lower() != b"connection"]
                message = {**message, "headers": [*kept, (b"connection", b"close")]}
            await send(message)
        return sending

    async def _read_only_refusal(self, scope: Scope, receive: Receive) -> tuple[Refused | None, Receive]:
        """For a read-only sign-in: 403 `insufficient_scope` for a call of a tool that writes (which its list did
        not show), before it runs; else the request, its body read here and handed on unchanged."""
        messages: list[Message] = []
        size = 0
        while size <= self.max_body_bytes:  # past it the SDK answers 413: nothing to look at
            message = await receive()
            messages.append(message)
            size += len(message.get("body", b""))
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        replay = iter(messages)

        async def replaying() -> Message:
            return next(replay, None) or await receive()

        tool = _called_tool(Headers(scope=scope), b"".join(m.get("body", b"") for m in messages))
        spec = next((spec for spec in self.server.tool_specs if spec.name == tool), None)
        if spec is None or spec.read_only:
            return None, replaying
        message = f"{tool} changes things, and this sign-in was granted reading only"
        return (403, error_body("forbidden", 403, message, "Sign in again without 'Read only' on the consent page "
                                "to let this app make changes."),
                {"WWW-Authenticate": f'{self.realm}, error="insufficient_scope"'}), replaying

    async def _refusal(self, headers: Headers, scope: Scope) -> Refused | None:
        refused = self.policy.refusal(headers.get("host"), headers.get("origin"))
        if refused is not None:
            kind = "forbidden" if refused.status == 403 else "misdirected"
            return refused.status, error_body(kind, refused.status, refused.message, refused.hint), {}
        if scope["method"] == "GET":
            # Stateless in both eras: nothing is ever pushed on a listening stream, so none is held open (each
            # would cost a connection at the balancer and memory here, for nothing). 405 is what the 2026-07-28
            # era answers, and what legacy clients take as "no GET stream" (docs/remote.md).
            return 405, error_body("method_not_allowed", 405, LISTEN_MESSAGE, LISTEN_HINT), {"Allow": "POST"}
        if not self.lifecycle.serving or self.server.state is None:
            # Before any tool, token check or upstream request: safe for a balancer to send elsewhere (retry-on 503).
            message, hint = (DRAINING_MESSAGE, DRAINING_HINT) if self.lifecycle.draining else (
                "this replica is starting; the request reached no tool", "Send the request again; another replica "
                "(or this one, once started) will serve it.")
            return 503, error_body("unavailable", 503, message, hint), {"Retry-After": "1", "Connection": "close"}
        try:
            narrowed(self.server.server_settings, headers)
            if self.per_request_auth:
                organization_id(headers)
        except HeaderError as exc:
            return 400, error_body("bad_request", 400, str(exc),
                                   "Fix or leave out the header named in the message."), {}
        if not self.per_request_auth:
            return None
        token = bearer_token(headers)
        if token is None:
            return 401, error_body("unauthorized", 401, "this server needs your own API token with each request",
                                   TOKEN_HINT), {"WWW-Authenticate": self.realm}
        client = scope.get("client")  # the socket's peer, or what a trusted proxy says (--trusted-proxy)
        address = client[0] if client else None
        transport = self.server.state.transport
        try:
            if self.sign_in is not None and self.sign_in.owns(token):
                return await self.sign_in.admit(scope, token, transport, self.verdicts, address)
            verdict = await self.verdicts.verdict(transport, token, address)
        except OverBudget as exc:
            wait = max(1, math.ceil(exc.retry_after))
            return 429, error_body("rate_limited", 429, "too many unknown API tokens from this address (or from "
                                   "everyone) were checked with the service in the last minute; this one was not "
                                   "checked yet", "Send a valid API token; if it is yours, send the request again "
                                   "after retry_after_seconds.", retry_after=wait), {"Retry-After": str(wait)}
        if not verdict.accepted:
            return 401, error_body("unauthorized", 401, "the service refused this API token (invalid or revoked)",
                                   "Create a new token at https://codegen.com/token and send it as "
                                   "Authorization: Bearer <token>."), {"WWW-Authenticate": self.refused_realm}
        return served_organization(scope, headers, verdict.served, self.verdicts.organizations)


def _called_tool(headers: Headers, body: bytes) -> str | None:
    """The tool a `tools/call` request names (the 2026-07-28 era says it in `Mcp-Name` too), or None."""
    if headers.get("mcp-method") == "tools/call":
        return headers.get("mcp-name")
    return rpc_names(body)[1]


async def _respond(send: Send, status: int, body: dict[str, Any], headers: Mapping[str, str]) -> None:
    payload = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
           *((name.lower().encode(), value.encode()) for name, value in headers.items())]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})
