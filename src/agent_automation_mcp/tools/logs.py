"""Toolset `logs`: an agent run's trace, page by page, trimmed so a page cannot flood a model's context."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Annotated, Any, Final

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from ..api.client import AgentAutomationClient, trace_continues
from ..api.errors import ApiError, InvalidRequestError
from ..api.models import LogEntry, LogPage
from ..api.params import Id
from .callers import CALL_SECONDS, client_for, state_of
from .declarations import Toolset
from .results import (
    PAGE_ITEMS_CHARS,
    Output,
    PageLimit,
    PageSkip,
    Timestamp,
    compact_json,
    counted,
    label,
    ok,
    trim_text,
)
from .trace_digest import DIGEST_TOKENS, TraceDigest, digest_summary, read_digest, render_digest, stopped_early

toolset = Toolset("logs", "Read an agent run's trace, page by page, with long values trimmed, or its digest.",
                  budget=340)

PAGING_SECONDS: Final = 40.0  # all_pages stops starting new pages after this; the call still ends < 50 s
MAX_ENTRIES: Final = 500  # a call returns at most this many entries
MAX_RESULT_CHARS: Final = PAGE_ITEMS_CHARS  # and about this much JSON of entries

# The service's message type is an open string (13 are documented, more may come): any short identifier is taken.
MessageType = Annotated[str, Field(max_length=64, pattern=r"^[A-Za-z][A-Za-z0-9_]*$")]


class TraceEntry(Output):
    created_at: Timestamp = None
    message_type: str | None = None
    thought: str | None = None
    tool_name: str | None = None
    tool_input: Any = None
    tool_output: Any = None
    observation: Any = None

    @model_serializer(mode="wrap")
    def _drop_empty(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {key: value for key, value in handler(self).items() if value is not None}


class TracePage(Output):
    agent_run_id: int
    status: str | None = None
    is_terminal: bool
    total_logs: int | None = None
    entries: list[TraceEntry]  # none in a digest
    digest: TraceDigest | None = None  # with digest=true
    read: int  # entries read from the trace, before the message_types filter
    next_skip: int | None
    trimmed_fields: int = 0
    note: str | None = None


def _trim(entry: LogEntry, max_chars: int) -> tuple[TraceEntry, int]:
    """Long strings are cut; long objects become their cut JSON text. Returns the entry and how many fields were cut."""
    values: dict[str, Any] = {}
    cut = 0
    for name in TraceEntry.model_fields:
        value = getattr(entry, name, None)
        text = compact_json(value) if isinstance(value, dict | list) else value
        if isinstance(text, str) and len(text) > max_chars:
            value = trim_text(text, max_chars)
            cut += 1
        values[name] = value
    return TraceEntry(**values), cut


@dataclass
class _Collected:
    """The entries a call returns, within MAX_ENTRIES and MAX_RESULT_CHARS."""

    max_chars: int
    wanted: set[str]
    entries: list[TraceEntry] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)  # the entries' skips, in the order read
    read: int = 0  # trace entries consumed, before the message_types filter
    trimmed: int = 0
    size: int = 0

    def take(self, logs: list[LogEntry], at: int) -> int:
        """Consume `logs` (the first at skip `at`) in order until the budget is spent; return how many were consumed
        (at least one entry is always returned, so every call makes progress)."""
        for consumed, log in enumerate(logs):
            if self.wanted and (log.message_type or "").upper() not in self.wanted:
                self.read += 1
                continue
            entry, cut = _trim(log, self.max_chars)
            entry_size = len(entry.model_dump_json())
            if self.entries and self.full(entry_size):
                return consumed
            self.entries.append(entry)
            self.positions.append(at + consumed)
            self.read += 1
            self.trimmed += cut
            self.size += entry_size
        return len(logs)

    def full(self, more: int = 0) -> bool:
        return len(self.entries) >= MAX_ENTRIES or self.size + more > MAX_RESULT_CHARS

    def full_note(self) -> str:
        return (f"stopped at {counted(len(self.entries), 'entry', 'entries')} ({self.size:,} characters): continue "
                "from next_skip")


@toolset.tool("Get agent run logs", "get_agent_run_logs", viewed=True)
async def get_agent_run_logs(
    agent_run_id: Id, ctx: Context, skip: PageSkip = 0, limit: PageLimit = 100,
    reverse: Annotated[bool, Field(description="Newest entries first.")] = False,
    message_types: Annotated[list[MessageType] | None, Field(max_length=20, description=(
        "Only these types, e.g. ACTION, ERROR, FINAL_ANSWER, USER_MESSAGE; follows pages as all_pages does."))] = None,
    digest: Annotated[bool, Field(description=(
        "What happened, not the entries: counts by type and tool, time and its longest gaps, errors, files, final "
        f"answer; from skip to the end of a trace of any length, in under {DIGEST_TOKENS} tokens."))] = False,
    all_pages: Annotated[bool, Field(
        description=f"Follow pages for up to {PAGING_SECONDS:g} s (at most {MAX_ENTRIES} entries, "
                    f"{MAX_RESULT_CHARS // 1000}k characters).")] = False,
) -> Annotated[CallToolResult, TracePage]:
    """Read an agent run's trace (its steps: thoughts, tool calls, errors, final answer) from skip, in pages
    of limit entries. Long values are trimmed. Pass next_skip as skip to continue (null at the end)."""
    if digest and (reverse or message_types):
        raise InvalidRequestError("get_agent_run_logs: a digest reads the whole trace from skip, oldest first: leave "
                                  "out reverse and message_types", operation="get_agent_run_logs")
    client = await client_for(ctx, CALL_SECONDS)
    if digest:
        return await _digest(ctx, client.as_bulk(), agent_run_id, skip, limit)
    all_pages = all_pages or bool(message_types)  # a filter over one page would miss what the next pages hold
    taken = _Collected(state_of(ctx).settings.max_field_chars, {kind.upper() for kind in message_types or ()})
    read = await _read_pages(ctx, client.as_bulk() if all_pages else client, taken,
                             _Asked(agent_run_id, skip, limit, reverse, all_pages))
    return _trace_result(read, taken)


@dataclass(frozen=True, slots=True)
class _Asked:
    """What a call asked of the trace: where to start, the page size, the order, whether to follow pages."""

    agent_run_id: int
    skip: int
    limit: int
    reverse: bool
    all_pages: bool


@dataclass(frozen=True, slots=True)
class _Read:
    """Where a call's reading stopped: the last page read, the skip to go on from (None at the end) and why it
    stopped short (`note`; `stopped`: a failure's own words, which the text says itself)."""

    asked: _Asked
    page: LogPage
    next_skip: int | None
    note: str | None = None
    stopped: str | None = None


async def _read_pages(ctx: Context, client: AgentAutomationClient, taken: _Collected, asked: _Asked) -> _Read:
    """Pages from `asked.skip` into `taken`: one page, or with `all_pages` on until the trace ends, the budget is
    spent or `PAGING_SECONDS` pass. A failure after the first page ends the reading with what it has."""
    started, position = time.monotonic(), asked.skip
    page: LogPage | None = None
    while True:
        try:
            page = await client.get_agent_run_logs(asked.agent_run_id, skip=position, limit=asked.limit,
                                                   reverse=asked.reverse)
        except ApiError as exc:
            if page is None:
                raise
            note, stopped = stopped_early(exc, "continue from next_skip")
            return _Read(asked, page, position, note, stopped)
        consumed = taken.take(page.logs, position)
        if consumed < len(page.logs):  # the budget ran out inside this page
            return _Read(asked, page, position + consumed, taken.full_note())
        after = position + consumed
        if not trace_continues(page, after, asked.limit):
            return _Read(asked, page, None)
        if not asked.all_pages:
            return _Read(asked, page, after)
        position = after
        await ctx.report_progress(taken.read, page.total_logs, f"read {taken.read} of {page.total_logs} trace entries")
        if taken.full():
            return _Read(asked, page, position, taken.full_note())
        if time.monotonic() - started > PAGING_SECONDS:
            return _Read(asked, page, position, f"stopped after {PAGING_SECONDS:g} s: continue from next_skip")


def _trace_result(read: _Read, taken: _Collected) -> CallToolResult:
    """The entries taken as the tool's result, its summary naming what was read and where to go on."""
    asked, page = read.asked, read.page
    out = TracePage(agent_run_id=asked.agent_run_id, status=page.status, is_terminal=page.is_terminal,
                    total_logs=page.total_logs, entries=taken.entries, read=taken.read, next_skip=read.next_skip,
                    trimmed_fields=taken.trimmed, note=read.note)
    end = "end of trace" if read.next_skip is None else f"next_skip={read.next_skip}"
    # The text names entries by their skip from the oldest, which a newest-first page knows only from total_logs.
    total = page.total_logs
    positions = ((None if total is None else [total - 1 - at for at in taken.positions]) if asked.reverse
                 else taken.positions)
    kinds = f"{'/'.join(sorted(taken.wanted))} " if taken.wanted else ""
    entries = counted(len(out.entries), f"{kinds}entry", f"{kinds}entries")
    said = f"; {read.stopped or read.note}" if read.note else ""
    return ok(out, f"{entries} (read {out.read} of {page.total_logs}{f' from skip {asked.skip}' if asked.skip else ''})"
                   f" from run {asked.agent_run_id}, {label(page.status)}; {end}{said}",
              render=lambda data: _trace_text(data, positions, note_said=read.stopped is None))


def _trace_text(page: dict[str, Any], positions: list[int] | None, *, note_said: bool) -> str:
    """The page as text (`trace_text`, loaded at the first call that writes one: a start never needs it)."""
    from .trace_text import render_trace

    return render_trace(page, positions, note_said=note_said)


async def _digest(ctx: Context, client: AgentAutomationClient, agent_run_id: int, skip: int,
                  limit: int) -> CallToolResult:
    async def progress(read: int, total: int | None) -> None:
        await ctx.report_progress(read, total, f"digested {read} of {total} trace entries")

    reading = await read_digest(client, agent_run_id, skip, limit, seconds=PAGING_SECONDS, progress=progress)
    page = reading.page
    out = TracePage(agent_run_id=agent_run_id, status=page.status, is_terminal=page.is_terminal,
                    total_logs=page.total_logs, entries=[], digest=reading.digest, read=reading.read,
                    next_skip=reading.next_skip, note=reading.note)
    return ok(out, digest_summary(agent_run_id, page.status, reading), render=render_digest)
