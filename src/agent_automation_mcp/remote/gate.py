"""What every request to `/mcp` passes before the MCP SDK sees it: Host and Origin, draining, a body that names
nothing longer than the server knows, headers, the token, the token's budget of task and completion requests, and a
read-only sign-in's calls. `CHECKS` lists them, in the order they run.

Answers in the one error shape (`{"error": {"kind", "status", "message", "hint"}}`) so a person reading a
refusal in a client's log knows what to send instead.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from starlette.types import ASGIApp, Receive, Scope, Send

from .. import tracing
from ..api.credentials import Credentials
from ..config import DEFAULT_MAX_BODY_BYTES, DEFAULT_REQUESTS_PER_TOKEN
from ..headers import HeaderError, bearer_token, header_dict, organization_id
from ..prompts import PROMPTS
from ..server import AgentAutomationServer
from ..tools.registry import narrowed, usable
from .access import note_reason
from .budgets import AddressBudgets, Budget, OverBudget
from .forwarded import client_address
from .hosts import HostPolicy
from .middleware import HttpMiddleware, ResponseStart, watching
from .organizations import ORG_NOT_ALLOWED, UNDECIDED, served_organization
from .refusals import Refused, refusal, respond
from .rpc_request import read_request
from .scopes import READ_ONLY_GRANT
from .verdicts import TokenVerdicts

if TYPE_CHECKING:  # the sign-in package is loaded only with --auth oauth
    from .oauth.signin import SignIn

REALM: Final = 'Bearer realm="agent-automation-mcp"'
TOKEN_HINT: Final = ("Send Authorization: Bearer <your Codegen API token> (from https://codegen.com/token) with each "
                     "request, and X-Organization-Id: <id> if the token sees several organisations.")

OVERLONG: Final = "overlong"  # the refusal's reason: a method, name or id longer than any this server knows
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


class McpGate(HttpMiddleware):
    """An ASGI app in front of the SDK's Streamable HTTP handler: `CHECKS`, in order, then the SDK."""

    def __init__(self, app: ASGIApp, server: AgentAutomationServer, policy: HostPolicy, lifecycle: Lifecycle, *,
                 per_request_auth: bool, verdicts: TokenVerdicts | None = None, sign_in: SignIn | None = None,
                 budgets: AddressBudgets | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        super().__init__(app)
        self.server = server
        self.policy = policy
        self.lifecycle = lifecycle
        self.per_request_auth = per_request_auth
        self.checks = tuple(check for check in CHECKS if per_request_auth or not check.per_request_auth)
        self.verdicts = verdicts or TokenVerdicts()
        self.budgets = budgets or AddressBudgets(server.shared, [token_requests_budget()])  # TOKEN_REQUESTS'
        self.max_body_bytes = max_body_bytes
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
        try:
            with tracing.span("gate") as span:
                refused = await self._refusal(scope)
                tracing.note(span, {"agent_automation.gate.status": refused.status if refused is not None else 200})
            if refused is not None:
                await respond(send, refused)
            else:
                await self.app(scope, receive, watching(send, self._closing_when_draining))
        finally:
            self.lifecycle.in_flight -= 1

    async def _over_token_budget(self, scope: Scope, headers: Mapping[str, str]) -> Refused | None:
        """429 for a task or completion request past its token's budget. Reads the headers again: after a sign-in,
        its grant's service token is the request's token."""
        request = read_request(scope)
        method = request.method if request is not None else None
        if method is None or not method.startswith(BUDGETED_METHODS):
            return None
        token = bearer_token(header_dict(scope["headers"]))  # read again: a sign-in put its service token there
        if token is None:
            return None
        try:
            await self.budgets.spend(TOKEN_REQUESTS, Credentials(token).token_key)
        except OverBudget as exc:
            note_reason(TOKEN_REQUESTS)
            limit = self.budgets.budgets[TOKEN_REQUESTS].per_address
            return _too_many(exc, f"this API token sent {limit} task and completion requests in the last minute, as "
                             "many as this server takes from one token", "Poll tasks less often; send this request "
                             "again after retry_after_seconds (tool calls are not refused for this).")
        return None

    def _closing_when_draining(self, start: ResponseStart) -> None:
        """An answer given while the replica drains closes its connection, so no balancer reuses it for more."""
        if self.lifecycle.draining:
            start.replace("connection", "close")

    async def _read_only_refusal(self, scope: Scope, headers: Mapping[str, str]) -> Refused | None:
        """For a read-only sign-in: 403 `insufficient_scope` for a call of a tool that writes (which its list did
        not show), before it runs."""
        if not scope.get("state", {}).get(READ_ONLY_GRANT):
            return None
        request = read_request(scope)
        tool = request.called_tool if request is not None else None
        spec = next((spec for spec in self.server.tool_specs if spec.name == tool), None)
        if spec is None or usable(spec, read_only=True):
            return None
        note_reason(INSUFFICIENT_SCOPE)
        message = f"{tool} changes things, and this sign-in was granted reading only"
        return refusal(403, message, "Sign in again without 'Read only' on the consent page to let this app make "
                       "changes.", headers={"WWW-Authenticate": f'{self.realm}, error="insufficient_scope"'})

    async def _refusal(self, scope: Scope) -> Refused | None:
        """The first refusal of this gate's checks, or None: the request goes on."""
        headers = header_dict(scope["headers"])
        for check in self.checks:
            refused = await check.refuses(self, scope, headers)
            if refused is not None:
                return refused
        return None

    async def _host_and_origin(self, scope: Scope, headers: Mapping[str, str]) -> Refused | None:
        return self.policy.refusal(headers.get("host"), headers.get("origin"))

    async def _listening(self, scope: Scope, headers: Mapping[str, str]) -> Refused | None:
        return LISTENING if scope["method"] == "GET" else None

    async def _serving(self, scope: Scope, headers: Mapping[str, str]) -> Refused | None:
        if self.lifecycle.serving and self.server.state is not None:
            return None
        return DRAINING if self.lifecycle.draining else STARTING

    async def _overlong(self, scope: Scope, headers: Mapping[str, str]) -> Refused | None:
        """Before the token: a stranger's flood is refused as cheaply as can be."""
        request = read_request(scope)
        overlong = request.overlong(self.longest_name) if request is not None else None
        if overlong is None:
            return None
        note_reason(OVERLONG)
        return refusal(400, *overlong)

    async def _headers(self, scope: Scope, headers: Mapping[str, str]) -> Refused | None:
        try:
            narrowed(self.server.server_settings, headers)
            if self.per_request_auth:
                organization_id(headers)
        except HeaderError as exc:
            return refusal(400, str(exc), "Fix or leave out the header named in the message.")
        return None

    async def _token(self, scope: Scope, headers: Mapping[str, str]) -> Refused | None:
        """The token, accepted by the service (or ours, for a sign-in's grant), and its organisations served here."""
        token = bearer_token(headers)
        if token is None:
            return self.no_token
        address = client_address(scope)  # the socket's peer, or what a trusted proxy says (--trusted-proxy)
        transport = self.server.state.transport
        try:
            if self.sign_in is not None and self.sign_in.owns(token):
                return await self.sign_in.admit(scope, token, transport, self.verdicts, address)
            verdict = await self.verdicts.verdict(transport, token, address)
        except OverBudget as exc:
            return _too_many(exc, f"too many unknown API tokens {exc.whose} were checked with the service in the "
                             "last minute; this one was not checked yet",
                             "Send a valid API token; if it is yours, send the request again after "
                             "retry_after_seconds.")
        if not verdict.accepted:
            return self.token_refused
        return served_organization(scope, headers, verdict.served, self.verdicts.organizations)


@dataclass(frozen=True, slots=True)
class GateCheck:
    """One check of every `/mcp` request: the method that makes it, the refusals it answers (status and reason, as
    `metrics.REFUSALS` counts them) and whether it runs only when each request brings its own token."""

    refuses: Callable[[McpGate, Scope, Mapping[str, str]], Awaitable[Refused | None]]
    refusals: tuple[tuple[int, str], ...]
    per_request_auth: bool = False


# What every `/mcp` request passes, in order: what costs nothing and needs no token first, so a stranger's flood is
# refused as cheaply as can be; then the token; then what the token may do. A new refusal is a row here (and its
# reason in `metrics.REFUSALS`: tests/remote/test_gate.py ties the two).
CHECKS: Final = (
    GateCheck(McpGate._host_and_origin, ((421, "host"), (403, "origin"))),
    GateCheck(McpGate._listening, ((405, "method_not_allowed"),)),
    GateCheck(McpGate._serving, ((503, "unavailable"),)),
    GateCheck(McpGate._overlong, ((400, OVERLONG),)),
    GateCheck(McpGate._headers, ((400, "bad_request"),)),
    GateCheck(McpGate._token, ((401, "no_token"), (401, "token_refused"), (429, "rate_limited"), (503, "unavailable"),
                               (403, ORG_NOT_ALLOWED), (502, UNDECIDED)), per_request_auth=True),
    GateCheck(McpGate._over_token_budget, ((429, TOKEN_REQUESTS),), per_request_auth=True),
    GateCheck(McpGate._read_only_refusal, ((403, INSUFFICIENT_SCOPE),)),
)


def _too_many(exc: OverBudget, message: str, hint: str) -> Refused:
    return refusal(429, message, hint, retry_after=max(1, math.ceil(exc.retry_after)))
