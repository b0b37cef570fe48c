"""The MCP server, built from the settings: which tools, the read-only ceiling, and the shared HTTP transport."""

from __future__ import annotations

import logging
import math
import time
import traceback
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, Literal, Protocol

from mcp import MCPError
from mcp.server import CacheHint, MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    CallToolResult,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
)
from mcp.types import Tool as MCPTool
from pydantic import ValidationError

from . import __version__
from .api.errors import ApiError, ConfigurationError
from .api.observer import TransportObserver
from .api.settings import ApiSettings
from .api.transport import ApiTransport
from .caching import ExpiringCache, SharedStore
from .config import DEFAULT_TENANT_CALLS, ServerSettings
from .guide import GUIDE_SECONDS, instructions, organization_said, repository_said
from .headers import HeaderError
from .logs import tenant_id
from .pacing import create_pacer
from .prompts import add_prompts
from .sdk_seams import drop_methods, instructions_per_request, serve_list_tools, tool_with_output
from .tasks import RunTasks
from .tasks.extension import MISSING_CAPABILITY, STILL_WORKING
from .tasks.notify import ListenObserver
from .tools.callers import (
    CALL_SECONDS,
    SLOT_RESERVE_SECONDS,
    CallerResolver,
    ConfiguredCaller,
    OrganizationCache,
    OrganizationInUse,
    ServerState,
    TenantSlots,
    client_for,
    slot_waited,
    state_of,
)
from .tools.confirm import continuation_security
from .tools.declarations import ToolSpec
from .tools.default_repository import DefaultRepository, Found, RepositoryCache
from .tools.errors import InternalError, argument_error, error_result, protocol_error, unknown_arguments
from .tools.input_schemas import compact_schema
from .tools.mentions import TOOL_NAMES, cut_schema, cut_to
from .tools.missing_actions import named_in
from .tools.outlines import model_outline
from .tools.registry import narrowed, offered_names, select_tools
from .view import RunsView

logger = logging.getLogger(__name__)

# The list changes only when the operator restarts the server with other settings or another version; a client
# holding an old one meanwhile at worst calls a tool that is gone and is told so (`Unknown tool`). Private: the list
# follows the request's narrowing headers, which a cache shared across callers would not see.
TOOLS_LIST_HINT: Final = CacheHint(ttl_ms=3_600_000, scope="private")
MAX_LISTINGS: Final = 64  # tool lists kept in wire form: one per tool set and protocol version seen

TOOLS_CALL: Final = "tools/call"
# A task method's outcome, a bounded set (a metric's label): `ok`, the one error shape's kind when its error holds one,
# else the word for its JSON-RPC error code, or `error`.
PROTOCOL_OUTCOMES: Final = {INVALID_PARAMS: "invalid_params", METHOD_NOT_FOUND: "method_not_found",
                            STILL_WORKING: "still_working", MISSING_CAPABILITY: "missing_capability"}

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class CallObserver(TransportObserver, ListenObserver, Protocol):
    """Sees every tool call and listen stream (metrics); nothing it is given names a token, tenant or organisation."""

    def call_started(self, tool: str) -> None: ...

    def call_finished(self, tool: str, outcome: str, seconds: float) -> None: ...

    def call_paused(self, tool: str, seconds: float) -> None:
        """The call asked the user (2026-07-28) and ends here; the answer comes back as a new call."""

    def request_started(self, method: str) -> None:
        """A task method (`tasks/get`, `tasks/result`...) began."""

    def request_finished(self, method: str, outcome: str, seconds: float) -> None:
        """A task method answered: `ok`, or one of the words `PROTOCOL_OUTCOMES` and the error kinds say."""


class AgentAutomationServer(MCPServer[ServerState]):
    """An `MCPServer` offering exactly the tools `select_tools` allows, with one error shape for every failure.

    Over HTTP a request may narrow what it lists and calls (`X-MCP-Toolsets`, `X-MCP-Readonly`), never beyond
    the operator's settings; each request's token has a cap on its calls and task requests in flight, past which
    they wait their turn.
    """

    def __init__(self, api: ApiSettings, settings: ServerSettings, *, callers: CallerResolver | None = None,
                 log_level: LogLevel = "WARNING", max_tenant_calls: int = DEFAULT_TENANT_CALLS,
                 observer: CallObserver | None = None, state_keys: Sequence[str] = ()) -> None:
        self.api_settings = api
        self.server_settings = settings
        self.tool_specs: tuple[ToolSpec, ...] = tuple(select_tools(settings))
        self._offered = offered_names(settings)
        self._callers = callers or ConfiguredCaller(api.token, api.org_id, settings.repo_id)
        # The cap shares a server among tenants; the one configured caller (stdio, --auth env) is never capped.
        self._slots = None if isinstance(self._callers, ConfiguredCaller) else TenantSlots(max_tenant_calls)
        self.observer = observer
        redis = None
        if api.redis_url:  # the Redis client costs start-up time: loaded only when used
            from .redis_pool import redis_client

            redis = redis_client(api.redis_url)  # the replica's one pool: pacing, shared caches, sign-in store
        self.shared = SharedStore(redis)  # per-token caches every replica shares (memory without Redis)
        self.state: ServerState | None = None  # while the lifespan runs: the shared transport, for the HTTP gate
        self._compact_tools: list[MCPTool] | None = None
        self._parameters: dict[str, frozenset[str]] = {}  # tool -> the argument names its schema takes
        self.listings: ExpiringCache[HandlerResult] = ExpiringCache(MAX_LISTINGS)
        view = RunsView(api.rate_limits)
        self.tasks = tasks = RunTasks(state_keys, self.shared, self._offered_to, observer)  # runs followed as tasks
        self._task_methods = frozenset(binding.method for binding in tasks.methods())
        tools = [tool_with_output(spec.handler, name=spec.name, title=spec.title, description=spec.description,
                                  annotations=spec.annotations, meta=view.meta_for(spec), output_model=spec.output,
                                  output_schema=model_outline(spec.output)) for spec in self.tool_specs]
        super().__init__(name="agent-automation", title="Agent Automation (Codegen)", version=__version__,
                         instructions=instructions(settings), lifespan=_lifespan, tools=tools,
                         log_level=log_level, subscriptions=False,  # the tool list never changes while the server runs
                         cache_hints={"tools/list": TOOLS_LIST_HINT}, extensions=[tasks, view],
                         middleware=[instructions_per_request(self._instructions_for), self._listing,
                                     self._task_request, tasks.middleware],
                         request_state_security=continuation_security(state_keys))
        # No resource templates: not answered, not advertised. Its one resource is the runs view.
        drop_methods(self, "resources/templates/")
        add_prompts(self, self._offered, self._offered_to, self.shared)
        serve_list_tools(self, self._list_offered_tools)

    async def list_tools(self) -> list[MCPTool]:
        if self._compact_tools is None:
            self._compact_tools = [
                tool.model_copy(update={"input_schema": compact_schema(tool.input_schema)})
                for tool in await super().list_tools()]
            self._parameters = {tool.name: frozenset(tool.input_schema.get("properties", {}))
                                for tool in self._compact_tools}
        return self._compact_tools

    async def _listing(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """`tools/list` in its wire form (cache hints and envelope included), built by the SDK once per tool set and
        protocol version and answered from memory after that: the list is the same for every request that may see
        the same tools, and serialising ~20 KB of schemas was most of what a listing cost."""
        if ctx.method != "tools/list" or (ctx.params or {}).get("cursor") is not None:
            return await call_next(ctx)
        key = f"{ctx.protocol_version}|{','.join(sorted(self._offered_to(getattr(ctx.request, 'headers', None))))}"
        wire = self.listings.get(key)
        if wire is None:
            wire = await call_next(ctx)
            self.listings.put(key, wire, math.inf)
        return wire

    async def _list_offered_tools(self, ctx: ServerRequestContext[Any],
                                  params: PaginatedRequestParams | None) -> ListToolsResult:
        """`tools/list` with the request's context, which `list_tools` does not get: listing may be narrowed, and a
        description or argument that names a tool the request is not offered is cut (`tools.mentions`)."""
        offered = self._offered_to(getattr(ctx.request, "headers", None))
        return ListToolsResult(tools=[
            tool.model_copy(update={"description": cut_to(tool.description or "", offered),
                                    "input_schema": cut_schema(tool.input_schema, offered)})
            for tool in await self.list_tools() if tool.name in offered])

    async def _instructions_for(self, ctx: ServerRequestContext[Any, Any]) -> str:
        """The guide for the request that asks: the tools it is offered, the organisation it acts in and its default
        repository."""
        settings = self._settings_for(getattr(ctx.request, "headers", None))
        offered = offered_names(settings)
        context: Context[ServerState, Any] = Context(request_context=ctx, mcp_server=self)
        org_id: int | None = None
        found: OrganizationInUse | ApiError
        try:
            org_id = self._callers.credentials(context).org_id
            found = await state_of(context).organizations.in_use(await client_for(context, GUIDE_SECONDS),
                                                                 GUIDE_SECONDS)
        except ApiError as exc:  # no usable token (ConfigurationError), or the service did not answer in time
            found = exc
        hint = self._callers.organization_hint
        default = self._callers.default_repository(context)
        repository = repository_said(default, await self._repository_found(context, default), offered)
        return instructions(self.server_settings, settings, organization_said(org_id, found, hint, offered),
                            repository)

    async def _repository_found(self, context: Context[ServerState, Any],
                                default: DefaultRepository | None) -> Found | ApiError | None:
        """Whether the organisation has the connection's default repository (None without one), within the guide's
        time; or why that could not be read."""
        if default is None:
            return None
        try:
            client = await (await client_for(context, GUIDE_SECONDS)).in_organization()
            return await state_of(context).repositories.found(client, default.id, GUIDE_SECONDS)
        except ApiError as exc:
            return exc

    def _settings_for(self, headers: Any) -> ServerSettings:
        """The server's settings, narrowed by the request's headers."""
        try:
            return narrowed(self.server_settings, headers)
        except HeaderError as exc:  # the HTTP gate refuses these first; this is the protocol's answer
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None

    def _offered_to(self, headers: Any) -> frozenset[str]:
        """The tools this request may list and call: the server's, narrowed by the request's headers."""
        settings = self._settings_for(headers)
        if settings == self.server_settings:
            return self._offered
        return offered_names(settings)

    # -- one path for every tenant request: a tool call and a task method take the same steps -----------------

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[ServerState, Any] | None = None) -> CallToolResult | InputRequiredResult:
        """`tools/call`, in steps that each do one thing: offered to this request (`_check_offered`), counted and
        logged (`_began`, `_ended`), within the token's cap on requests in flight (`_call_in_slot`), its arguments
        checked (`_call_checked`), the tool run with any failure in the one error shape (`_call_run`)."""
        self._check_offered(name, context)
        tenant, started = self._tenant(context), time.monotonic()
        self._began(TOOLS_CALL, name)
        result: CallToolResult | InputRequiredResult | None = None
        try:
            result = await self._call_in_slot(name, arguments, context, tenant, started)
        finally:
            self._ended(TOOLS_CALL, name, _outcome(result), tenant, started)
        return result

    async def _task_request(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """A task method (`tasks/get`, `tasks/result`, ...) through the steps a tool call takes: counted and logged
        under its own method, within the same cap on its token's requests in flight. `tasks/result` holds a
        request up to 35 s: unbounded, a flood of them would take every worker a call needs."""
        if ctx.method not in self._task_methods:
            return await call_next(ctx)
        tenant = self._tenant(Context(request_context=ctx, mcp_server=self))
        started = time.monotonic()
        self._began(ctx.method, None)
        outcome = "internal_error"  # unless it answers or is refused
        try:
            result = await self._task_in_slot(ctx, call_next, tenant, started)
            outcome = "ok"
            return result
        except MCPError as exc:
            outcome = _protocol_outcome(exc)
            raise
        except ValidationError:  # its parameters, refused by the SDK before the method ran
            outcome = PROTOCOL_OUTCOMES[INVALID_PARAMS]
            raise
        finally:
            self._ended(ctx.method, None, outcome, tenant, started)

    def _check_offered(self, name: str, context: Context[ServerState, Any] | None) -> None:
        """The spec's protocol error for a tool outside the toolsets or the read-only ceiling: it does not exist
        here. One named for what the service cannot do is told so, and the closest thing."""
        offered = self._offered_to(context.headers if context is not None else None)
        if name not in offered:
            missing = "" if name in TOOL_NAMES else cut_to(named_in(name), offered)  # `merge_pull_request`
            raise MCPError(code=INVALID_PARAMS, message=" ".join(f"Unknown tool: {name}. {missing}".split()))

    def _tenant(self, context: Context[ServerState, Any] | None) -> str | None:
        """The caller's token hash, or None when the call has no usable token (the tool then says why)."""
        if context is None:
            return None
        try:
            return self._callers.credentials(context).token_key
        except ConfigurationError:
            return None

    def _began(self, method: str, tool: str | None) -> None:
        """In flight, for the metrics: nothing here names the tenant."""
        if self.observer is None:
            return
        if tool is None:
            self.observer.request_started(method)
        else:
            self.observer.call_started(tool)

    def _ended(self, method: str, tool: str | None, outcome: str, tenant: str | None, started: float) -> None:
        """The metrics and the log line of a finished request (a question asked of the user is not one: paused)."""
        seconds = time.monotonic() - started
        if self.observer is not None:
            if tool is None:
                self.observer.request_finished(method, outcome, seconds)
            elif outcome == PAUSED:
                self.observer.call_paused(tool, seconds)
            else:
                self.observer.call_finished(tool, outcome, seconds)
        if logger.isEnabledFor(logging.INFO):  # the tenant's name is an HMAC: computed only when logged
            _log_request(method, tool, outcome, tenant_id(tenant), seconds)

    @asynccontextmanager
    async def _slot(self, tenant: str | None, started: float) -> AsyncIterator[None]:
        """One of the token's slots on this server, waited for until the request's deadline (`TenantSlots`: the
        one configured caller is never capped); the wait is spent from the request's budget (`slot_waited`).
        `RateLimitError` when the deadline comes first."""
        if self._slots is None:
            yield
            return
        async with self._slots.hold(tenant or "", started + CALL_SECONDS - SLOT_RESERVE_SECONDS):
            waited = slot_waited.set(time.monotonic() - started)
            try:
                yield
            finally:
                slot_waited.reset(waited)

    async def _call_in_slot(self, name: str, arguments: dict[str, Any], context: Context[ServerState, Any] | None,
                            tenant: str | None, started: float) -> CallToolResult | InputRequiredResult:
        """The call within its token's slot; refused in the one error shape when none came in time."""
        try:
            async with self._slot(tenant, started):
                return await self._call_checked(name, arguments, context)
        except ApiError as exc:  # waited past the deadline for a slot
            return error_result(exc)

    async def _task_in_slot(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, tenant: str | None,
                            started: float) -> HandlerResult:
        """The task method within its token's slot; refused as a protocol error holding the one error shape."""
        try:
            async with self._slot(tenant, started):
                return await call_next(ctx)
        except ApiError as exc:  # waited past the deadline for a slot
            raise protocol_error(exc) from None

    async def _call_checked(self, name: str, arguments: dict[str, Any],
                            context: Context[ServerState, Any] | None) -> CallToolResult | InputRequiredResult:
        """Unknown arguments refused by name, else a misspelt one would be dropped unnoticed."""
        await self.list_tools()  # builds the schemas once, with the parameter names
        accepted = self._parameters[name]
        if unknown := sorted(set(arguments or {}) - accepted):
            return error_result(unknown_arguments(name, unknown, accepted))
        return await self._call_run(name, arguments, context)

    async def _call_run(self, name: str, arguments: dict[str, Any],
                        context: Context[ServerState, Any] | None) -> CallToolResult | InputRequiredResult:
        """The SDK runs the tool; a failure is answered in the one error shape, its hint cut to the tools this
        request is offered."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            error = _tool_error(name, exc)
        offered = self._offered_to(context.headers if context is not None else None)
        return error_result(error, lambda hint: cut_to(hint, offered), self.tool_specs)


def _log_request(method: str, tool: str | None, outcome: str, tenant: str | None, seconds: float) -> None:
    """A tool call's line (`tool_call`, or `tool_call_paused` for a question asked), or a task method's
    (`task_request`); the tenant is its HMAC."""
    facts = {"outcome": outcome, "duration": round(seconds, 4), "tenant": tenant}
    if tool is None:
        logger.info("%s: %s in %.3f s (tenant %s)", method, outcome, seconds, tenant or "-",
                    extra={"event": "task_request", "method": method, **facts})
    else:
        logger.info("tool %s: %s in %.3f s (tenant %s)", tool, outcome, seconds, tenant or "-",
                    extra={"event": "tool_call_paused" if outcome == PAUSED else "tool_call", "tool": tool, **facts})


def _tool_error(name: str, exc: ToolError) -> ApiError:
    """What failed, as the one error shape tells it: the service's answer, arguments the SDK refused before the tool
    ran, or a fault in this server (logged with where, never with the exception's message: it could quote a value
    we were sent)."""
    cause = exc.__cause__
    if isinstance(cause, ApiError):
        return cause
    if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
        return argument_error(name, cause)
    what = type(cause or exc).__name__
    logger.error("tool %s failed inside the server (%s):\n%s", name, what,
                 "".join(traceback.format_tb((cause or exc).__traceback__)))
    return InternalError(f"{name} failed inside this server ({what})", operation=name)


PAUSED: Final = "input_required"  # the call asked the user a question; not a finished call


def _protocol_outcome(exc: MCPError) -> str:
    error = exc.data.get("error") if isinstance(exc.data, dict) else None
    kind = error.get("kind") if isinstance(error, dict) else None
    return kind if isinstance(kind, str) else PROTOCOL_OUTCOMES.get(exc.code, "error")


def _outcome(result: CallToolResult | InputRequiredResult | None) -> str:
    """`ok`, `input_required`, or the error kind of the one error shape (`internal_error` when the call blew up)."""
    if isinstance(result, InputRequiredResult):
        return PAUSED
    if result is None:
        return "internal_error"
    if isinstance(result, CallToolResult) and result.is_error:
        error = (result.structured_content or {}).get("error")
        return str(error.get("kind", "error")) if isinstance(error, dict) else "error"
    return "ok"


@asynccontextmanager
async def _lifespan(server: MCPServer[ServerState]) -> AsyncIterator[ServerState]:
    """One pooled HTTP transport per process, shared by every caller, and the relay of run reads; closed on
    shutdown."""
    assert isinstance(server, AgentAutomationServer)
    api = server.api_settings
    async with ApiTransport(api, create_pacer(api, store=server.shared), observer=server.observer) as transport:
        server.state = ServerState(transport=transport, callers=server._callers, settings=server.server_settings,
                                   organizations=OrganizationCache(server.shared),
                                   repositories=RepositoryCache(server.shared), statuses=server.tasks.status,
                                   offered_to=server._offered_to)
        try:
            async with server.tasks.reads.relaying():  # the other replicas' run reads, for listen streams
                yield server.state
        finally:
            server.state = None
            await server.shared.aclose()


def build_server(api: ApiSettings, settings: ServerSettings, *, callers: CallerResolver | None = None,
                 log_level: LogLevel = "WARNING", max_tenant_calls: int = DEFAULT_TENANT_CALLS,
                 observer: CallObserver | None = None, state_keys: Sequence[str] = ()) -> AgentAutomationServer:
    return AgentAutomationServer(api, settings, callers=callers, log_level=log_level,
                                 max_tenant_calls=max_tenant_calls, observer=observer, state_keys=state_keys)
