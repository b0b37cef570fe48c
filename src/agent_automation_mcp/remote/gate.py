"""What every request to `/mcp` passes before the MCP SDK sees it: Host and Origin, draining, headers, the token,
then the body, a body that names nothing longer than the server knows, the token's budget of task and completion
requests, and a read-only sign-in's calls. `CHECKS` lists them, in the order they run.

The gate is the edge: it resolves the caller once (`caller.py`), before a byte of the body is read, so a stranger's
body is never read, parsed or held (it costs what uvicorn buffers of it per connection); a known caller's is read
within a deadline and under the replica's bound on body bytes held at once (`bodies.py`), and read for its few
members by a bounded parser (`rpc_request.py`). The request's span starts once the body is read (its parent may be
in it), with the gate's spans, kept until then, inside it (`tracing.recorded`).

Answers in the one error shape (`{"error": {"kind", "status", "message", "hint"}}`) so a person reading a
refusal in a client's log knows what to send instead.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from starlette.types import ASGIApp, Receive, Scope, Send

from .. import logs, tracing
from ..api.credentials import Credentials
from ..api.transport import ApiTransport
from ..caller import Caller, caller_in, hand_on
from ..config import DEFAULT_BODY_BYTES_HELD, DEFAULT_MAX_BODY_BYTES, DEFAULT_REQUESTS_PER_TOKEN
from ..headers import AUTHORIZATION, HeaderError, bearer_token, header_dict, organization_id, repository_id
from ..prompts import PROMPTS
from ..server import AgentAutomationServer
from ..tools.registry import narrowed, usable
from .access import note_reason, note_trace
from .bodies import BODIES_HELD, Body, BodyBytes, read_body
from .budgets import AddressBudgets, Budget, OverBudget
from .forwarded import client_address
from .hosts import HostPolicy
from .middleware import HttpMiddleware, ResponseStart, watching
from .organizations import ORG_NOT_ALLOWED, UNDECIDED, acting_in, served_organization
from .refusals import Refused, refusal, respond
from .rpc_request import STATE_KEY, RpcRequest, read_request
from .verdicts import TokenVerdicts

if TYPE_CHECKING:  # the sign-in package is loaded only with --auth oauth
    from .oauth.signin import SignIn

REALM: Final = 'Bearer realm="agent-automation-mcp"'
TOKEN_HINT: Final = ("Send Authorization: Bearer <your Codegen API token> (from https://codegen.com/token) with each "
                     "request, and X-Organization-Id: <id> if the token sees several organisations.")

OVERLONG: Final = "overlong"  # the refusal's reason: a method, name or id longer than any this server knows (or a body
# more intricate than the bounded parser reads)
INSUFFICIENT_SCOPE: Final = "insufficient_scope"  # the refusal's reason: a read-only sign-in called a tool that writes
# Task requests and completions: each is cheap and reads shared state or the service for the token (a run's status,
# its repositories), and nothing else bounds how many one token sends (tool calls wait for --max-tenant-calls; what
# is answered from memory, such as tools/list, costs a little CPU). This budget does, per token, shared by the
# replicas. Prefixes of the methods it counts:
BUDGETED_METHODS: Final = ("tasks/", "completion/")
TOKEN_REQUESTS: Final = "requests_per_token"


def token_requests_budget(per_token: int = DEFAULT_REQUESTS_PER_TOKEN) -> Budget:
    """Task and completion requests per token (its hash is the budget's key, so no network), per minute."""
    return Budget(TOKEN_REQUESTS, per_token, per_network=None)


# Stateless in both eras: nothing is ever pushed on a listening stream, so none is held open (each would cost a
# connection at the balancer and memory here, for nothing). 405 is what the 2026-07-28 era answers, and what legacy
# clients take as "no GET stream" (docs/remote.md).
LISTENING: Final = refusal(
    405, "this server is stateless: it never sends anything on a listening GET stream", "Send requests with POST; "
    "answers, progress and questions come back on each POST's own response (MCP clients carry on without the GET "
    "stream when they get 405).", headers={"Allow": "POST"})
# Before any tool, token check or upstream request: safe for a balancer to send elsewhere (retry-on 503).
DRAINING: Final = refusal(
    503, "this replica is shutting down; the request reached no tool", "Send the same request again: nothing was "
    "done, and another replica will serve it (a load balancer may do so itself: manifests/haproxy).",
    headers={"Retry-After": "1", "Connection": "close"})
STARTING: Final = refusal(
    503, "this replica is starting; the request reached no tool", "Send the request again; another replica (or this "
    "one, once started) will serve it.", headers={"Retry-After": "1", "Connection": "close"})


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


@dataclass(slots=True)
class Admission:
    """One request on its way through the gate: what the checks read, and its body once read."""

    scope: Scope
    headers: Mapping[str, str]
    receive: Receive
    body: Body | None = None


class McpGate(HttpMiddleware):
    """An ASGI app in front of the SDK's Streamable HTTP handler: `CHECKS`, in order, then the SDK."""

    def __init__(self, app: ASGIApp, server: AgentAutomationServer, policy: HostPolicy, lifecycle: Lifecycle, *,
                 per_request_auth: bool, verdicts: TokenVerdicts | None = None, sign_in: SignIn | None = None,
                 budgets: AddressBudgets | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                 body_bytes_held: int = DEFAULT_BODY_BYTES_HELD) -> None:
        super().__init__(app)
        self.server = server
        self.policy = policy
        self.lifecycle = lifecycle
        self.per_request_auth = per_request_auth
        self.checks = tuple(check for check in CHECKS if per_request_auth or not check.per_request_auth)
        self.verdicts = verdicts or TokenVerdicts()
        self.budgets = budgets or AddressBudgets(server.shared, [token_requests_budget()])  # TOKEN_REQUESTS'
        self.max_body_bytes = max_body_bytes
        self.bodies = BodyBytes(body_bytes_held)
        self.longest_name = max(len(name) for name in (*(spec.name for spec in server.tool_specs),
                                                       *(prompt.name for prompt in PROMPTS)))
        self.sign_in = sign_in  # --auth oauth: our access tokens, and 401s that point at the sign-in metadata
        self.realm = sign_in.challenge if sign_in is not None else REALM
        self.no_token = refusal(401, "this server needs your own API token with each request", TOKEN_HINT,
                                headers={"WWW-Authenticate": self.realm})
        self.token_refused = refusal(
            401, "the service refused this API token (invalid or revoked)", "Create a new token at "
            "https://codegen.com/token and send it as Authorization: Bearer <token>.",
            headers={"WWW-Authenticate": f'{self.realm}, error="invalid_token"'})

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.lifecycle.in_flight += 1  # from the start: a token check is part of the request a drain waits for
        request = Admission(scope, header_dict(scope["headers"]), receive)
        try:
            with tracing.recorded() as kept, tracing.span("gate") as span:  # the trace is known once the body is
                refused = await self._refusal(request)
                tracing.note(span, {"agent_automation.gate.status": refused.status if refused else 200})
            await self._answer(request, send, refused, kept)
        finally:
            if request.body is not None:
                self.bodies.give_back(request.body.held)
            self.lifecycle.in_flight -= 1

    async def _refusal(self, request: Admission) -> Refused | None:
        """The first refusal of this gate's checks, or None: the request goes on."""
        for check in self.checks:
            refused = await check.refuses(self, request)
            if refused is not None:
                return refused
        return None

    async def _answer(self, request: Admission, send: Send, refused: Refused | None,
                      kept: tracing.KeptSpan | None) -> None:
        """The refusal, or the SDK's answer, in the request's span (its parent the caller's, from a header or the
        body), holding the gate's spans."""
        scope, status = request.scope, 500
        read = read_request(scope)

        def answered(start: ResponseStart) -> None:
            nonlocal status
            status = start.status
            if self.lifecycle.draining:  # closes its connection, so no balancer reuses it for more
                start.replace("connection", "close")

        with tracing.serving(scope, tracing.incoming(scope, read.trace if read else None), kept) as span:
            note_trace(tracing.trace_id(span))
            try:
                if refused is not None:
                    await respond(watching(send, answered), refused)
                else:
                    body = request.body
                    await self.app(scope, body.receive if body else request.receive, watching(send, answered))
            finally:
                caller = caller_in(scope)
                tracing.served(span, status, logs.request_id.get() or "",
                               logs.tenant_id(caller.token_key) if caller is not None else None)

    async def _host_and_origin(self, request: Admission) -> Refused | None:
        return self.policy.refusal(request.headers.get("host"), request.headers.get("origin"))

    async def _listening(self, request: Admission) -> Refused | None:
        return LISTENING if request.scope["method"] == "GET" else None

    async def _serving(self, request: Admission) -> Refused | None:
        if self.lifecycle.serving and self.server.state is not None:
            return None
        return DRAINING if self.lifecycle.draining else STARTING

    async def _headers(self, request: Admission) -> Refused | None:
        try:
            narrowed(self.server.server_settings, request.headers)
            if self.per_request_auth:
                organization_id(request.headers)
                repository_id(request.headers)
        except HeaderError as exc:
            return refusal(400, str(exc), "Fix or leave out the header named in the message.")
        return None

    async def _token(self, request: Admission) -> Refused | None:
        """The caller: the token, accepted by the service (or ours, for a sign-in's grant), and its organisations
        served here. Handed on as a value (`caller.py`); the bearer header goes no further."""
        token = bearer_token(request.headers)
        if token is None:
            return self.no_token
        state = self.server.state
        if state is None:  # the lifespan ended after `_serving` let the request in
            return await self._serving(request)
        scope = request.scope
        address = client_address(scope)  # the socket's peer, or what a trusted proxy says (--trusted-proxy)
        transport = state.transport
        try:
            if self.sign_in is not None and self.sign_in.owns(token):
                admitted = await self.sign_in.admit(scope, token, organization_id(request.headers), transport,
                                                    self.verdicts, address)
            else:
                admitted = await self._bearer(token, request.headers, address, transport)
        except OverBudget as exc:
            return _too_many(exc, f"too many unknown API tokens {exc.whose} were checked with the service in the "
                             "last minute; this one was not checked yet",
                             "Send a valid API token; if it is yours, send the request again after "
                             "retry_after_seconds.")
        if isinstance(admitted, Refused):
            return admitted
        hand_on(scope, replace(admitted, repo_id=repository_id(request.headers)))
        scope["headers"] = [(name, value) for name, value in scope["headers"] if name.lower() != AUTHORIZATION.encode()]
        return None

    async def _bearer(self, token: str, headers: Mapping[str, str], address: str | None,
                      transport: ApiTransport) -> Caller | Refused:
        """A service token sent as it is (`--auth request`, or beside sign-ins)."""
        verdict = await self.verdicts.verdict(transport, token, address)
        if not verdict.accepted:
            return self.token_refused
        named = organization_id(headers)
        refused = served_organization(named, verdict.served, self.verdicts.organizations)
        return refused or Caller(Credentials(token, acting_in(named, verdict.served)))

    async def _body(self, request: Admission) -> Refused | None:
        """A POST's body, read once its caller is known, within the deadline and the replica's bound on body bytes
        held; what it asks is read for the checks after this, the trace context and the access line. A body still
        coming holds no drain: the replica's state is checked again once it came."""
        if request.scope["method"] != "POST":
            return None
        self.lifecycle.in_flight -= 1
        try:
            body = await read_body(request.scope, request.receive, self.max_body_bytes, self.bodies)
        finally:
            self.lifecycle.in_flight += 1
        if isinstance(body, Refused):
            return body
        request.body = body
        read = RpcRequest.read(body.content) if body.content is not None else RpcRequest()
        request.scope.setdefault("state", {})[STATE_KEY] = read
        return await self._serving(request)

    async def _overlong(self, request: Admission) -> Refused | None:
        """A method, name or id the SDK would name its span and error after, longer than any this server knows."""
        read = read_request(request.scope)
        overlong = read.overlong(self.longest_name) if read is not None else None
        if overlong is None:
            return None
        note_reason(OVERLONG)
        return refusal(400, *overlong)

    async def _over_token_budget(self, request: Admission) -> Refused | None:
        """429 for a task or completion request past its token's budget (a sign-in's: its service token's)."""
        read, caller = read_request(request.scope), caller_in(request.scope)
        method = read.method if read is not None else None
        if method is None or caller is None or not method.startswith(BUDGETED_METHODS):
            return None
        try:
            await self.budgets.spend(TOKEN_REQUESTS, caller.token_key)
        except OverBudget as exc:
            note_reason(TOKEN_REQUESTS)
            limit = self.budgets.budgets[TOKEN_REQUESTS].per_address
            return _too_many(exc, f"this API token sent {limit} task and completion requests in the last minute, as "
                             "many as this server takes from one token", "Poll tasks less often; send this request "
                             "again after retry_after_seconds (tool calls are not refused for this).")
        return None

    async def _read_only_refusal(self, request: Admission) -> Refused | None:
        """For a read-only sign-in: 403 `insufficient_scope` for a call of a tool that writes (which its list did
        not show), before it runs."""
        caller = caller_in(request.scope)
        if caller is None or not caller.read_only:
            return None
        read = read_request(request.scope)
        tool = read.called_tool if read is not None else None
        spec = next((spec for spec in self.server.tool_specs if spec.name == tool), None)
        if spec is None or usable(spec, read_only=True):
            return None
        note_reason(INSUFFICIENT_SCOPE)
        message = f"{tool} changes things, and this sign-in was granted reading only"
        return refusal(403, message, "Sign in again without 'Read only' on the consent page to let this app make "
                       "changes.", headers={"WWW-Authenticate": f'{self.realm}, error="insufficient_scope"'})


@dataclass(frozen=True, slots=True)
class GateCheck:
    """One check of every `/mcp` request: the method that makes it, the refusals it answers (status and reason, as
    `metrics.REFUSALS` counts them) and whether it runs only when each request brings its own token."""

    refuses: Callable[[McpGate, Admission], Awaitable[Refused | None]]
    refusals: tuple[tuple[int, str], ...]
    per_request_auth: bool = False


# What every `/mcp` request passes, in order: what costs nothing and needs no body first, so a stranger's flood is
# refused as cheaply as can be and its bodies are never read; then the caller; then the body, once its caller is
# known; then what the body asks. A new refusal is a row here (and its reason in `metrics.REFUSALS`:
# tests/remote/test_gate.py ties the two).
CHECKS: Final = (
    GateCheck(McpGate._host_and_origin, ((421, "host"), (403, "origin"))),
    GateCheck(McpGate._listening, ((405, "method_not_allowed"),)),
    GateCheck(McpGate._serving, ((503, "unavailable"),)),
    GateCheck(McpGate._headers, ((400, "bad_request"),)),
    GateCheck(McpGate._token, ((401, "no_token"), (401, "token_refused"), (429, "rate_limited"), (503, "unavailable"),
                               (403, ORG_NOT_ALLOWED), (502, UNDECIDED)), per_request_auth=True),
    GateCheck(McpGate._body, ((408, "body_too_slow"), (503, BODIES_HELD), (503, "unavailable"))),
    GateCheck(McpGate._overlong, ((400, OVERLONG),)),
    GateCheck(McpGate._over_token_budget, ((429, TOKEN_REQUESTS),), per_request_auth=True),
    GateCheck(McpGate._read_only_refusal, ((403, INSUFFICIENT_SCOPE),)),
)


def _too_many(exc: OverBudget, message: str, hint: str) -> Refused:
    return refusal(429, message, hint, retry_after=max(1, math.ceil(exc.retry_after)))
