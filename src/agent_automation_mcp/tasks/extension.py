"""Agent runs followed as MCP tasks, in both protocol eras, as one SDK `Extension`.

A tool that starts or continues a run (`RunEffect.sets_going`, by its operations) answers a client that asked for a
task with a task handle instead of the run; `tasks/get` then follows the run until it ends, with the same result
`get_agent_run` gives, and `tasks/cancel` stops it with a tool that stops a run (`RunEffect.STOPS`) where the request
is offered one. No task is stored: the
id seals what is needed (`ids`), the service stays the one source of the run's state (`status`), and any replica
answers; what is remembered (a token's ids for `tasks/list`, a cancel asked) only adds to an answer, and expires.
2026-07-28: the `io.modelcontextprotocol/tasks` extension (the `tools/call` interceptor, `tasks/get`,
`tasks/cancel`). 2025-11-25: the same methods plus `tasks/result` and `tasks/list`; a legacy `tools/call` result is
validated as `CallToolResult`, so the task answer there comes from `middleware`, above that check.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Final

import anyio
from mcp import MCPError
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import Context
from mcp.types import INVALID_PARAMS, METHOD_NOT_FOUND, CallToolRequestParams, CallToolResult, RequestParams
from pydantic import ConfigDict, Field

from ..api.client import AgentAutomationClient
from ..api.credentials import Credentials
from ..api.errors import ApiError, ConfigurationError
from ..api.models import AgentRun
from ..api.statuses import STOPPED, ending_reason, is_failure, status_of, waits_on_person
from ..caching import SharedCache, SharedStore
from ..run_status import POLL_SECONDS, READ_SECONDS, Reading, RunStatus, now_ms, reading_of
from ..tenancy import tenant_key
from ..tools.callers import CALL_SECONDS, ServerState, client_for, slot_waited
from ..tools.checks import CLOSEST_TO_CANCEL
from ..tools.errors import error_result
from ..tools.mentions import cut_to
from ..tools.registry import all_tools
from ..tools.results import label
from ..tools.runs import PAUSED_SAYS, RESUME_WITH, duration, run_result
from .ids import TaskRecord, TaskSeal
from .listing import MAX_TTL_MS, TaskIndex
from .notify import MAX_TASKS_PER_STREAM, ListenObserver, RunRead, RunReads

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
LEGACY: Final = "2025-11-25"
# The tools that start or continue a run, and the field of their result naming it (`run_field`, which a tool declares
# exactly when its operations set a run going: `ToolSpec` refuses it anywhere else).
RUN_ID_FIELDS: Final = MappingProxyType({spec.name: field for spec in all_tools()
                                         if spec.run_effect.sets_going and (field := spec.run_field) is not None})
# The tools that stop a run (`RunEffect.STOPS`), and the operation each stops it with: what a task's cancel sends.
STOPPING_TOOLS: Final = MappingProxyType({spec.name: operation for spec in all_tools()
                                          if (operation := spec.stops_with) is not None})
STOP_SECONDS: Final = CALL_SECONDS - 10  # the stop a cancel sends waits for room and its answer at most this
TTL_SECONDS: Final = MAX_TTL_MS // 1000  # a run takes minutes to hours; a client that asks (2025-11-25) may shorten it
MIN_TTL_SECONDS: Final = 1
RESULT_SECONDS: Final = CALL_SECONDS - 10  # tasks/result waits at most this (its last read within), then says so
# Every message of a task after `tasks/cancel` ends with one of these (cut where the request is not offered the tool it
# names): while the service cannot stop a run, that and what comes closest; else whether a tool stopped it.
CANCEL_ASKED: Final = (
    "Cancel was asked, but the service cannot cancel an agent run{going}. {tool} comes closest, only on the user's "
    "explicit request: it stops every agent working on the run's pull request.")
NO_STOP_OFFERED: Final = "Cancel was asked where no tool that stops an agent run is offered{going}."
STOP_SENT: Final = "Cancel was asked: {tool} asked the service to stop run {run}."
STOP_FAILED: Final = "Cancel was asked, but {tool} could not stop the run ({problem}){going}."
MISSING_CAPABILITY: Final = -32021  # the spec's: the request needs a client capability it did not declare
STILL_WORKING: Final = -32000  # implementation-defined: tasks/result gave up waiting
LEGACY_CAPABILITIES: Final[dict[str, dict[str, Any]]] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


class TaskIdParams(RequestParams):
    model_config = ConfigDict(defer_build=True)  # its validator built at the first task request, not at every start

    task_id: str = Field(max_length=1000)


class TaskListParams(RequestParams):
    model_config = ConfigDict(defer_build=True)

    cursor: str | None = Field(default=None, max_length=20)


class RunTasks(Extension):
    """The tasks extension: what `MCPServer(extensions=[...])` applies, plus `middleware` for 2025-11-25."""

    identifier = TASKS_EXTENSION

    def __init__(self, keys: Sequence[str], store: SharedStore, offered_to: Callable[[Any], frozenset[str]],
                 observer: ListenObserver | None = None) -> None:
        self.offered_to = offered_to  # the tools a request (its headers) is offered: what its messages may name
        self.seal = TaskSeal(keys)
        self.reads = RunReads(store, observer)
        self.status = RunStatus(store, error_result,
                                lambda org, run, reading: self.reads.publish(RunRead(org, run, reading)))
        self.index = TaskIndex(store)
        self.stoppers: Mapping[str, str] = STOPPING_TOOLS  # the tools a cancel may stop a run with: their operations
        # A cancel asked, by task: the tool that was sent to stop its run and its problem, if any ({}: none was).
        self._cancel_asked: SharedCache[dict[str, str]] = SharedCache(store, "task-cancel", 10_000)

    def methods(self) -> Sequence[MethodBinding]:
        legacy = frozenset({LEGACY})
        return [MethodBinding("tasks/get", TaskIdParams, self._get),
                MethodBinding("tasks/cancel", TaskIdParams, self._cancel),
                MethodBinding("tasks/result", TaskIdParams, self._result, protocol_versions=legacy),
                MethodBinding("tasks/list", TaskListParams, self._list, protocol_versions=legacy)]

    async def intercept_tool_call(self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any],
                                  call_next: CallNext) -> HandlerResult:
        """2026-07-28: a client that declared the extension on this request gets a task for a run it starts."""
        capabilities = ctx.session.client_capabilities
        declared = capabilities is not None and TASKS_EXTENSION in (capabilities.extensions or {})
        result = await call_next(ctx)
        if params.name not in RUN_ID_FIELDS or not declared or not isinstance(result, CallToolResult):
            return result
        task = await self._started(ctx, params.name, result, TTL_SECONDS * 1000, legacy=False)
        return result if task is None else {"resultType": "task", **task}

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """What an `Extension` cannot contribute. 2026-07-28: `subscriptions/listen` on task ids (the SDK's listen
        handler knows only its own events). 2025-11-25: tasks advertised at `initialize` and on the tools in
        `tools/list`, and a `tools/call` with a `task` field answered with a task (the SDK would refuse that answer
        from a tool-call handler)."""
        if ctx.method == "subscriptions/listen":
            wanted = ((ctx.params or {}).get("notifications") or {}).get("taskIds")
            return await (self._listen(ctx, wanted) if isinstance(wanted, list) and wanted else call_next(ctx))
        if ctx.method == "initialize":
            return _advertised(await call_next(ctx))
        if ctx.protocol_version != LEGACY:
            return await call_next(ctx)
        if ctx.method == "tools/list":
            return _declared(await call_next(ctx))
        if ctx.method == "tools/call" and isinstance((ctx.params or {}).get("task"), dict):
            return await self._legacy_call(ctx, call_next)
        return await call_next(ctx)

    async def _legacy_call(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """A 2025-11-25 `tools/call` with a `task` field: the tool runs as it would, and a run it starts is a task."""
        params = dict(ctx.params or {})
        asked, name = params.pop("task"), params.get("name")
        if name not in RUN_ID_FIELDS:
            raise MCPError(code=METHOD_NOT_FOUND, message=f"{str(name)[:80]!r} does not run as a task (its "
                                                          "execution.taskSupport is absent): call it without `task`")
        ttl = asked.get("ttl")
        ttl_ms = TTL_SECONDS * 1000 if not isinstance(ttl, int) else min(max(ttl, MIN_TTL_SECONDS * 1000),
                                                                          TTL_SECONDS * 1000)
        wire = await call_next(replace(ctx, params=params))
        if not isinstance(wire, dict):
            return wire
        task = await self._started(ctx, str(name), CallToolResult.model_validate(wire), ttl_ms, legacy=True)
        return wire if task is None else {"task": task}

    # -- the methods --------------------------------------------------------------------------------------------

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        client, record = await self._open(ctx, params.task_id)
        legacy = ctx.protocol_version == LEGACY
        task = await self._current(ctx, client, params.task_id, record, legacy=legacy)
        return task if legacy else {"resultType": "complete", **task}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        """Acknowledged, and where the request is offered a tool that stops a run (`stoppers`), the run stopped with
        it (the user asked: nothing more is asked). Without one the run goes on. Every later answer says which.
        2025-11-25 answers with the task as it stands, never `cancelled` unless the service says the run stopped,
        and refuses a task that has already ended."""
        client, record = await self._open(ctx, params.task_id)
        legacy = ctx.protocol_version == LEGACY
        stopper = next((tool for tool in self.stoppers if tool in self._offered(ctx)), None)
        if legacy or stopper is not None:
            task = await self._current(ctx, client, params.task_id, record, legacy=legacy)
            if task["status"] != "working" and legacy:
                raise MCPError(code=INVALID_PARAMS, message=f"Task already {task['status']}: nothing to cancel")
            if task["status"] != "working":
                return {"resultType": "complete"}  # nothing left to stop
        asked = {} if stopper is None else await self._stop(client, record, stopper)
        await self._cancel_asked.put(_digest(params.task_id), asked, max(1.0, (record.expires_ms - now_ms()) / 1000))
        if not legacy:
            return {"resultType": "complete"}
        return await self._current(ctx, client, params.task_id, record, legacy=True)

    async def _stop(self, client: AgentAutomationClient, record: TaskRecord, tool: str) -> dict[str, str]:
        """The task's run stopped with the operation `tool` sends (the client's method of that name, which takes the
        run's id); no reading sent before it is taken for the run's state, whatever its answer."""
        sent = now_ms()
        try:
            await getattr(client.within(STOP_SECONDS), self.stoppers[tool])(agent_run_id=record.run_id)
        except ApiError as exc:
            return {"tool": tool, "problem": exc.kind}
        finally:
            await self.status.changed(client, record.org_id, record.run_id, sent)
        return {"tool": tool}

    async def _result(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        """The run's final answer, waited for within the call budget and never longer (a wait for one of the token's
        slots on this server spent from it)."""
        client, record = await self._open(ctx, params.task_id)
        began = time.monotonic()
        give_up = began + RESULT_SECONDS - slot_waited.get()
        while True:
            seconds = max(1.0, min(READ_SECONDS, give_up - time.monotonic()))
            reading = await self.status.read(client, record.org_id, record.run_id, seconds=seconds)
            result = self._ending(ctx, reading)
            if result is not None:
                meta = {"io.modelcontextprotocol/related-task": {"taskId": params.task_id}}
                wire = result.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"result_type"})
                return {**wire, "_meta": meta}
            left = give_up - time.monotonic()
            if left <= 0:
                raise MCPError(code=STILL_WORKING, message=(
                    f"Run {record.run_id} is still working after {time.monotonic() - began:.0f} s (this server answers "
                    "within its call budget): call tasks/result again, or poll tasks/get"))
            await anyio.sleep(min(reading.poll_ms / 1000, left))

    async def _list(self, ctx: ServerRequestContext[Any, Any], params: TaskListParams) -> dict[str, Any]:
        """The caller's own tasks (its token's, in its organisation), newest first, as each last read."""
        credentials = self._credentials(ctx)
        start = int(params.cursor) if params.cursor and params.cursor.isdigit() else 0
        ids, more = await self.index.page(credentials.token_key, start)
        tasks = []
        for task_id in ids:
            record = self._theirs(task_id, credentials)
            if record is None or record.expires_ms <= now_ms():
                continue
            client = self._client(ctx, credentials, record)
            reading = await self.status.read(client, record.org_id, record.run_id)
            tasks.append(await self._view(ctx, task_id, record, reading, legacy=True))
        return {"tasks": tasks, **({"nextCursor": str(start + len(ids))} if more else {})}

    async def _listen(self, ctx: ServerRequestContext[Any, Any], wanted: list[Any]) -> dict[str, Any]:
        """A listen stream on the caller's own tasks among `wanted` (the ack names them; others are left out)."""
        capabilities = ctx.session.client_capabilities
        if capabilities is None or TASKS_EXTENSION not in (capabilities.extensions or {}):
            raise MCPError(code=MISSING_CAPABILITY, message="Missing required client capability",
                           data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})
        credentials = self._credentials(ctx)
        records: dict[str, TaskRecord] = {}
        for task_id in wanted[:MAX_TASKS_PER_STREAM]:
            record = self._theirs(task_id, credentials) if isinstance(task_id, str) else None
            if record is not None and record.expires_ms > now_ms():
                records[task_id] = record

        async def view(task_id: str, reading: dict[str, Any]) -> dict[str, Any]:
            return await self._view(ctx, task_id, records[task_id], reading_of(reading), legacy=False)

        async def refresh(task_id: str) -> dict[str, Any]:
            record = records[task_id]
            reading = await self.status.read(self._client(ctx, credentials, record), record.org_id, record.run_id)
            return await self._view(ctx, task_id, record, reading, legacy=False)

        runs = {task_id: (record.org_id, record.run_id) for task_id, record in records.items()}
        return await self.reads.stream(ctx, tenant_key(credentials), runs, view, refresh)

    # -- what they share ----------------------------------------------------------------------------------------

    async def _started(self, ctx: ServerRequestContext[Any, Any], tool: str, result: CallToolResult, ttl_ms: int, *,
                       legacy: bool) -> dict[str, Any] | None:
        """The task for the run `result` names, or None when it names none (an error: answered as it is)."""
        run_id = (result.structured_content or {}).get(RUN_ID_FIELDS[tool])
        if result.is_error or not isinstance(run_id, int):
            return None
        credentials = self._credentials(ctx)
        org_id = credentials.org_id
        if org_id is None:  # found for the call just made: remembered, so this costs no request
            state = _state(ctx)
            client = await client_for(Context(request_context=ctx))
            org_id = await state.organizations.resolve(client, state.callers.organization_hint)
        record = TaskRecord(org_id, run_id, tool, now_ms(), ttl_ms)
        task_id = self.seal.seal(record, credentials.token_key)
        await self.index.add(credentials.token_key, task_id, record.created_ms)
        status = (result.structured_content or {}).get("status")
        message = f"{tool} started a task following run {run_id} ({label(status)})."
        return self._task(task_id, record, "working", message, record.created_ms, legacy=legacy)

    async def _view(self, ctx: ServerRequestContext[Any, Any], task_id: str, record: TaskRecord, reading: Reading, *,
                    legacy: bool) -> dict[str, Any]:
        """The task as `reading` shows its run; the service's text never enters the message (a status word only)."""
        run, result = reading.run, self._ending(ctx, reading)
        known = status_of(run.status) if run is not None else None
        if result is None:
            status, said = "working", self._going(ctx, record, reading)
        elif known is not None and known.kind is STOPPED:
            status, said = "cancelled", f"The service reports run {record.run_id} {label(known.value)}."
        else:
            where = "tasks/result has" if legacy else "result holds"
            why = ending_reason(run.status) if run is not None else None
            status, said = "completed", (
                f"Run {record.run_id} ended {label(run.status)}{f' ({why})' if why else ''}; {where} its result."
                if run is not None else f"Run {record.run_id} cannot be read ({reading.problem}); {where} why.")
        asked = await self._cancel_asked.get(_digest(task_id))
        if asked is not None:
            going = f": run {record.run_id} goes on" if status == "working" else ""
            said += " " + self._offered_text(ctx, cancel_said(asked, record.run_id, going))
        task = self._task(task_id, record, status, said, reading.read_ms, reading.poll_ms, legacy=legacy)
        if status == "completed" and not legacy:
            assert result is not None
            task["result"] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        return task

    async def _current(self, ctx: ServerRequestContext[Any, Any], client: AgentAutomationClient, task_id: str,
                       record: TaskRecord, *, legacy: bool) -> dict[str, Any]:
        """The task as its run's status reads now (the shared read)."""
        reading = await self.status.read(client, record.org_id, record.run_id)
        return await self._view(ctx, task_id, record, reading, legacy=legacy)

    def _going(self, ctx: ServerRequestContext[Any, Any], record: TaskRecord, reading: Reading) -> str:
        """The message of a task whose run goes on, or waits for someone to resume it (the task stays followable)."""
        run = reading.run
        if run is None:
            return (f"Run {record.run_id}'s status could not be read just now ({reading.problem}); asking again in "
                    f"{reading.poll_ms // 1000} s.")
        since = f"{duration(max(0, (now_ms() - record.created_ms) // 1000))} since {record.tool} started this task."
        if waits_on_person(run.status):
            return self._offered_text(ctx, f"Run {record.run_id} is {label(run.status)}, {since} It is "
                                           f"{PAUSED_SAYS}{RESUME_WITH}.")
        return f"Run {record.run_id} is {label(run.status)}, {since}"

    def _ending(self, ctx: ServerRequestContext[Any, Any], reading: Reading) -> CallToolResult | None:
        """The task's result once it has one: the run's final answer, or why the run cannot be read any more."""
        if reading.ended is not None:
            return reading.ended
        if reading.run is not None and reading.run.is_terminal:
            return self._final(ctx, reading.run)
        return None

    def _final(self, ctx: ServerRequestContext[Any, Any], run: AgentRun) -> CallToolResult:
        """get_agent_run's answer for the finished run; a run that ended in error is an error result."""
        result = run_result(run, _state(ctx).settings.max_field_chars)
        return result.model_copy(update={"is_error": True}) if is_failure(run.status) else result

    @staticmethod
    def _task(task_id: str, record: TaskRecord, status: str, message: str, updated_ms: int,
              poll_ms: int = int(POLL_SECONDS * 1000), *, legacy: bool) -> dict[str, Any]:
        ttl, interval = ("ttl", "pollInterval") if legacy else ("ttlMs", "pollIntervalMs")
        return {"taskId": task_id, "status": status, "statusMessage": message, "createdAt": _iso(record.created_ms),
                "lastUpdatedAt": _iso(max(updated_ms, record.created_ms)), ttl: record.ttl_ms, interval: poll_ms}

    async def _open(self, ctx: ServerRequestContext[Any, Any],
                    task_id: str) -> tuple[AgentAutomationClient, TaskRecord]:
        """The caller's client and the task's record; "not found" for an id that is not theirs, before any request."""
        credentials = self._credentials(ctx)
        record = self._theirs(task_id, credentials)
        if record is None:
            raise MCPError(code=INVALID_PARAMS, message="Task not found",
                           data={"hint": "Use the taskId a tools/call answered you with, unchanged."})
        if now_ms() >= record.expires_ms:
            raise MCPError(code=INVALID_PARAMS, message=f"Task not found: it expired at {_iso(record.expires_ms)}",
                           data={"hint": self._offered_text(ctx, f"Follow run {record.run_id} with get_agent_run.")
                                 or f"Run {record.run_id} goes on without a task."})
        return self._client(ctx, credentials, record), record

    def _offered(self, ctx: ServerRequestContext[Any, Any]) -> frozenset[str]:
        """The tools the request is offered (its headers may narrow the server's)."""
        return self.offered_to(getattr(ctx.request, "headers", None))

    def _offered_text(self, ctx: ServerRequestContext[Any, Any], text: str) -> str:
        """`text` cut to the tools the request is offered (`tools.mentions`)."""
        return cut_to(text, self._offered(ctx))

    def _theirs(self, task_id: str, credentials: Credentials) -> TaskRecord | None:
        """The task's record if the caller was given it (its token's, in its organisation if it names one), expired
        or not."""
        record = self.seal.open(task_id, credentials.token_key)
        return record if record is not None and credentials.org_id in (None, record.org_id) else None

    @staticmethod
    def _credentials(ctx: ServerRequestContext[Any, Any]) -> Credentials:
        try:
            return _state(ctx).callers.credentials(Context(request_context=ctx))
        except ConfigurationError as exc:
            raise MCPError(code=INVALID_PARAMS, message=f"Task not found: {exc.message}",
                           data={"hint": exc.hint}) from None

    @staticmethod
    def _client(ctx: ServerRequestContext[Any, Any], credentials: Credentials,
                record: TaskRecord) -> AgentAutomationClient:
        return AgentAutomationClient(_state(ctx).transport, replace(credentials, org_id=record.org_id))


def cancel_said(asked: dict[str, str], run_id: int, going: str) -> str:
    """What every message of a task says once its cancel was asked (`going`: that the run goes on, or nothing)."""
    tool = asked.get("tool")
    if tool is None:
        return (NO_STOP_OFFERED.format(going=going) if CLOSEST_TO_CANCEL is None
                else CANCEL_ASKED.format(going=going, tool=CLOSEST_TO_CANCEL))
    if "problem" in asked:
        return STOP_FAILED.format(tool=tool, problem=asked["problem"], going=going)
    return STOP_SENT.format(tool=tool, run=run_id)


def _advertised(wire: HandlerResult) -> HandlerResult:
    """A 2025-11-25 `initialize` result with the `tasks` capability (the SDK 2.3 no longer adds it)."""
    if isinstance(wire, dict) and wire.get("protocolVersion") == LEGACY:
        return {**wire, "capabilities": {**wire.get("capabilities", {}), "tasks": LEGACY_CAPABILITIES}}
    return wire


def _declared(wire: HandlerResult) -> HandlerResult:
    """A 2025-11-25 `tools/list` result whose run-starting tools declare task support (for the host only)."""
    if isinstance(wire, dict) and isinstance(wire.get("tools"), list):
        return {**wire, "tools": [{**tool, "execution": {"taskSupport": "optional"}}
                                  if tool.get("name") in RUN_ID_FIELDS else tool for tool in wire["tools"]]}
    return wire


def _state(ctx: ServerRequestContext[Any, Any]) -> ServerState:
    state = ctx.lifespan_context
    assert isinstance(state, ServerState)
    return state


def _digest(task_id: str) -> str:
    return hashlib.sha256(task_id.encode()).hexdigest()[:32]



def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")
