"""One access line per `/mcp` request, at INFO, and the refusal counters: what an on-call engineer reads first.

The line names the request (its id, echoed in `X-Request-Id`), what it asked (the JSON-RPC method and the
tool), how it ended (the tool's outcome or the refusal's reason, the HTTP status), how long it took and who
asked (the tenant by `logs.tenant_id`, never the token or its plain hash). It wraps the gate, so refusals
are logged and counted too. What it names comes from the gate: the caller it resolved (`caller.py`), what the body
asks (`rpc_request`: a body is read only once its caller is known, so a request refused before names no method)
and the trace id of the request's span.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import time
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from .. import logs
from ..caller import caller_in
from ..headers import header_dict
from .forwarded import client_address
from .metrics import Metrics
from .middleware import HttpMiddleware, ResponseStart, watching
from .rpc_request import read_request

logger = logging.getLogger(__name__)

REQUEST_ID_HEADER: Final = "x-request-id"
REQUEST_ID: Final = re.compile(r"[A-Za-z0-9._:-]{1,128}")  # a caller's or balancer's id is kept when it is sane
# Why a request was refused, by HTTP status (401 is split by whether a token was sent and refused).
MAX_ERROR_BODY_BYTES: Final = 4096  # of a sign-in endpoint's JSON error, read for its `error` code
OAUTH_ERROR: Final = re.compile(r"[a-z_]{1,40}")  # an OAuth error code (RFC 6749 5.2, 7591 3.2.2), as a reason
SIGNIN_REASONS: Final[Mapping[str, str]] = {"too_many_requests": "rate_limited",
                                            "temporarily_unavailable": "unavailable"}
REASONS: Final[Mapping[int, str]] = {400: "bad_request", 401: "no_token", 403: "origin", 405: "method_not_allowed",
                                     406: "not_acceptable", 408: "body_too_slow",
                                     413: "body_too_large", 421: "host", 429: "rate_limited", 503: "unavailable"}


@dataclass(slots=True)
class _Call:
    """What the server noted about the request's tool call or task method, if it made one."""

    tool: str | None = None
    outcome: str | None = None
    reason: str | None = None  # why the request was refused, when its refuser named it (`note_reason`)
    trace_id: str | None = None  # of the request's span, once the gate started it (`note_trace`)


_current_call: ContextVar[_Call | None] = ContextVar("current_call", default=None)


def note_reason(reason: str) -> None:
    """Name why the current request is refused, for its access line and the refusal counters."""
    call = _current_call.get()
    if call is not None:
        call.reason = reason


def note_trace(trace_id: str | None) -> None:
    """Name the current request's trace, for its access line."""
    call = _current_call.get()
    if call is not None:
        call.trace_id = trace_id


class AccessLog(HttpMiddleware):
    """An ASGI app around `/mcp`'s gate."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        super().__init__(app)
        self.metrics = metrics

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.monotonic()
        given = header_dict(scope["headers"]).get(REQUEST_ID_HEADER, "")
        rid = given if REQUEST_ID.fullmatch(given) else secrets.token_hex(16)
        response: dict[str, Any] = {"status": 500, "token_refused": False}

        def answered(start: ResponseStart) -> None:
            response["status"] = start.status
            response["token_refused"] = "invalid_token" in start.headers.get("www-authenticate", "")
            start.append(REQUEST_ID_HEADER, rid)

        call = _Call()
        rid_token = logs.request_id.set(rid)
        call_token = _current_call.set(call)
        try:
            await self.app(scope, receive, watching(send, answered))
        finally:
            _current_call.reset(call_token)
            self._record(scope, call, response, time.monotonic() - started)
            logs.request_id.reset(rid_token)

    def _record(self, scope: Scope, call: _Call, response: Mapping[str, Any], seconds: float) -> None:
        status: int = response["status"]
        reason = None
        if 400 <= status < 500 or status in (502, 503):
            reason = call.reason or ("token_refused" if response["token_refused"] else REASONS.get(status, "other"))
        self.metrics.responded(status, reason)
        if not logger.isEnabledFor(logging.INFO):
            return
        caller, request = caller_in(scope), read_request(scope)
        tenant = logs.tenant_id(caller.token_key) if caller is not None else None
        method, named_tool = request.quoted() if request is not None else (None, None)
        outcome = call.outcome or reason or ("ok" if status < 400 else "error")
        tool = call.tool or named_tool or None
        trace = call.trace_id  # so the line leads to the request's trace
        logger.info("%s %s %s%s %d %s %.3f s tenant %s%s", scope["method"], scope["path"], method or "-",
                    f" {tool}" if tool else "", status, outcome, seconds, tenant or "-",
                    f" trace {trace}" if trace else "",
                    extra={"event": "access", "http_method": scope["method"], "path": scope["path"],
                           "method": method, "tool": tool, "status": status, "outcome": outcome,
                           "duration": round(seconds, 4), "tenant": tenant, "client": client_address(scope),
                           **({"trace_id": trace} if trace else {})})


class SignInAccess(HttpMiddleware):
    """One access line per request to a sign-in endpoint (`endpoint`: authorize, consent, token, register, revoke,
    metadata) and its count in `agent_automation_oauth_requests`: the status and a short reason, `ok` or why it was
    refused. The line never holds a code, token, verifier or secret: only the endpoint, method, status, reason,
    duration and client address are written, and a reason is a short word the endpoint or an OAuth error code gave."""

    def __init__(self, app: ASGIApp, endpoint: str, metrics: Metrics) -> None:
        super().__init__(app)
        self.endpoint = endpoint
        self.metrics = metrics

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.monotonic()
        endpoint = "consent" if self.endpoint == "authorize" and scope["method"] == "POST" else self.endpoint
        response: dict[str, Any] = {"status": 500, "location": "", "json": False}
        body = bytearray()

        def answered(start: ResponseStart) -> None:
            response["status"] = start.status
            response["location"] = start.headers.get("location", "")
            response["json"] = start.headers.get("content-type", "").startswith("application/json")

        def answering(part: bytes) -> None:
            if response["json"] and response["status"] >= 400 and len(body) < MAX_ERROR_BODY_BYTES:
                body.extend(part[:MAX_ERROR_BODY_BYTES - len(body)])

        call = _Call()
        token = _current_call.set(call)
        try:
            await self.app(scope, receive, watching(send, answered, answering))
        finally:
            _current_call.reset(token)
            status = response["status"]
            reason = call.reason or _signin_reason(status, response["location"], bytes(body) if response["json"]
                                                   else b"")
            self.metrics.signin_answered(endpoint, status, reason)
            seconds = time.monotonic() - started
            logger.info("%s %s %s %d %s %.3f s", scope["method"], scope["path"], endpoint, status, reason, seconds,
                        extra={"event": "oauth", "http_method": scope["method"], "path": scope["path"],
                               "endpoint": endpoint, "status": status, "reason": reason,
                               "duration": round(seconds, 4), "client": client_address(scope)})


def _signin_reason(status: int, location: str, error_body: bytes) -> str:
    """`ok`, or the OAuth error a JSON answer or a redirect names (a word from a fixed set), or the status's reason."""
    error = None
    if 300 <= status < 400 and location:
        error = parse_qs(urlsplit(location).query).get("error", [None])[0]
    elif error_body:
        try:
            answer = json.loads(error_body)
        except ValueError:
            answer = None
        error = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(error, str) and OAUTH_ERROR.fullmatch(error):
        return SIGNIN_REASONS.get(error, error)
    if status < 400:
        return "ok"
    return "too_large" if status == 413 else REASONS.get(status, "other")


class AccessMetrics(Metrics):
    """The server's `CallObserver` over HTTP: the metrics, and the tool's outcome noted for the request's access
    line (the SDK runs the tool in a task started from the request's context, so it sees the request's `_Call`)."""

    def call_finished(self, tool: str, outcome: str, seconds: float) -> None:
        super().call_finished(tool, outcome, seconds)
        self._note(tool, outcome)

    def call_paused(self, tool: str, seconds: float) -> None:
        super().call_paused(tool, seconds)
        self._note(tool, "paused")  # a confirmation's first round: the tool has not run yet

    def request_finished(self, method: str, outcome: str, seconds: float) -> None:
        super().request_finished(method, outcome, seconds)
        self._note(None, outcome)  # a refused task method is still HTTP 200: its outcome says what happened

    @staticmethod
    def _note(tool: str | None, outcome: str) -> None:
        call = _current_call.get()
        if call is not None:
            call.tool, call.outcome = tool, outcome

