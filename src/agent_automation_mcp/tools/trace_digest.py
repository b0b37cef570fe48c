"""What happened in a run, from its trace of any length, in a few hundred tokens: `get_agent_run_logs(digest=true)`.

The digest reads the trace page by page within the call's budget, folding each page into counts as it goes (memory
does not grow with the trace), and reads the last page early, so even a trace too long for one call shows how it
ended. It says which entries it read and where to go on. Every list is bounded and every quoted text is a short
excerpt, so its text stays under `DIGEST_TOKENS` whatever the trace holds; service text in it is written as JSON
strings on lines of our own, and never in the summary.
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from ..api.client import AgentAutomationClient, trace_continues
from ..api.errors import ApiError
from ..api.models import LogEntry, LogPage
from ..api.text import excerpt
from .bounded_text import MORE_CHARS, bounded_line, fitting, quoted
from .results import Output, Timestamp, compact_json, instant, label
from .runs import duration

DIGEST_TOKENS: Final = 800  # what a model reads of a digest (summary and text), characters / 4, at most
MAX_TYPES: Final = 13  # as many as the service documents
MAX_TOOLS: Final = 8
MAX_ERROR_KINDS: Final = 5
MAX_FILES: Final = 6
MAX_GAPS: Final = 3
NAME_CHARS: Final = 32  # a message type or tool name
ERROR_CHARS: Final = 90
PATH_CHARS: Final = 60
ANSWER_CHARS: Final = 280
# Each line's share of the text, in characters (the summary line takes the rest): their sum and the longest summary
# stay under DIGEST_TOKENS * 4 whatever the trace holds.
LINE_CHARS: Final = {"note": 200, "time": 320, "types": 420, "tools": 320, "errors": 700, "files": 420,
                     "final answer": 300}
TRACKED: Final = 1_000  # distinct names, errors or files counted one by one; more are counted together
# Where a trace says which file a step touched: Codegen's file tools take `filepath` (`new_filepath` to rename).
FILE_INPUTS: Final = ("filepath", "file_path", "new_filepath", "target_file")
FILES_TOUCHED: Final = "files_touched"  # a list of paths some observations and tool outputs carry
ANSWER_KEYS: Final = ("answer", "message", "text", "summary", "result")
ERROR_KEYS: Final = ("message", "error", "detail")


class Gap(Output):
    after_skip: int  # the step the time went to: the entry before the gap
    seconds: float
    message_type: str | None = None
    tool_name: str | None = None


class ErrorKind(Output):
    count: int
    first_skip: int
    last_skip: int
    message_type: str | None = None
    tool_name: str | None = None
    message: str | None = None


class FileTouch(Output):
    path: str
    count: int
    tools: list[str]


class FinalAnswer(Output):
    skip: int
    text: str


class TraceDigest(Output):
    covered: list[tuple[int, int]]  # the skips read, first and last of each stretch
    first_at: Timestamp = None
    last_at: Timestamp = None
    seconds: float | None = None
    gaps: list[Gap]
    message_types: dict[str, int]
    other_types: int = 0  # entries of types past the ones listed
    tools: dict[str, int]
    other_tools: int = 0
    error_entries: int
    errors: list[ErrorKind]  # the kinds, most frequent first
    error_kinds: int
    files: list[FileTouch]
    file_count: int
    final_answer: FinalAnswer | None = None


@dataclass
class _Kind:
    count: int
    first: int
    last: int


@dataclass
class Tally:
    """A trace's entries folded into what the digest says, one at a time, in the order of their skips."""

    secret: str  # the caller's token, redacted from every excerpt
    types: Counter[str] = field(default_factory=Counter)
    tools: Counter[str] = field(default_factory=Counter)
    untracked: Counter[str] = field(default_factory=Counter)  # entries of types, steps of tools past TRACKED names
    errors: dict[tuple[str | None, str | None, str | None], _Kind] = field(default_factory=dict)
    error_entries: int = 0
    files: dict[str, tuple[int, set[str]]] = field(default_factory=dict)
    gaps: list[tuple[float, int, str | None, str | None]] = field(default_factory=list)  # a min-heap of the longest
    first_at: tuple[datetime, str] | None = None
    last_at: tuple[datetime, str] | None = None
    previous: tuple[int, datetime, str | None, str | None] | None = None
    final: FinalAnswer | None = None
    covered: list[tuple[int, int]] = field(default_factory=list)

    def add(self, position: int, log: LogEntry) -> None:
        kind = self._quote(log.message_type, NAME_CHARS)
        tool = self._quote(log.tool_name, NAME_CHARS)
        self._count("types", self.types, kind or "(none)")
        if tool is not None:
            self._count("tools", self.tools, tool)
        self._time(position, log.created_at, kind, tool)
        if _is_error(log):
            self.error_entries += 1
            key = (kind, tool, self._quote(_error_text(log), ERROR_CHARS))
            if (known := self.errors.get(key)) is not None:
                known.count, known.last = known.count + 1, position
            elif len(self.errors) < TRACKED:
                self.errors[key] = _Kind(1, position, position)
        for path in _paths(log):
            if shown := self._quote(path, PATH_CHARS):
                self._file(shown, tool)
        if (kind or "").upper() == "FINAL_ANSWER":
            self.final = FinalAnswer(skip=position, text=self._quote(_answer_text(log), ANSWER_CHARS) or "")
        if self.covered and self.covered[-1][1] == position - 1:
            self.covered[-1] = (self.covered[-1][0], position)
        else:
            self.covered.append((position, position))

    def _time(self, position: int, created_at: str | None, kind: str | None, tool: str | None) -> None:
        moment = instant(created_at)
        if moment is None:
            self.previous = None
            return
        stamp = (moment, created_at or "")
        if self.first_at is None or moment < self.first_at[0]:
            self.first_at = stamp
        if self.last_at is None or moment >= self.last_at[0]:
            self.last_at = stamp
        before = self.previous
        if before is not None and before[0] == position - 1:  # only between neighbours
            gap = (round((moment - before[1]).total_seconds(), 1), before[0], before[2], before[3])
            if len(self.gaps) < MAX_GAPS:
                heapq.heappush(self.gaps, gap)
            elif gap[0] > self.gaps[0][0]:
                heapq.heapreplace(self.gaps, gap)
        self.previous = (position, moment, kind, tool)

    def _count(self, what: str, counter: Counter[str], name: str) -> None:
        if name in counter or len(counter) < TRACKED:
            counter[name] += 1
        else:
            self.untracked[what] += 1

    def _file(self, path: str, tool: str | None) -> None:
        count, tools = self.files.get(path, (0, set()))
        if count or len(self.files) < TRACKED:
            if tool is not None and len(tools) < 3:
                tools.add(tool)
            self.files[path] = (count + 1, tools)

    def _quote(self, text: Any, max_chars: int) -> str | None:
        return None if text is None else excerpt(str(text), self.secret, max_chars)

    def digest(self) -> TraceDigest:
        types = self.types.most_common(MAX_TYPES)
        tools = self.tools.most_common(MAX_TOOLS)
        kinds = sorted(self.errors.items(), key=lambda item: (-item[1].count, item[1].first))
        files = sorted(self.files.items(), key=lambda item: -item[1][0])
        return TraceDigest(
            covered=self.covered,
            first_at=self.first_at[1] if self.first_at else None, last_at=self.last_at[1] if self.last_at else None,
            seconds=round((self.last_at[0] - self.first_at[0]).total_seconds(), 1)
            if self.first_at and self.last_at else None,
            gaps=[Gap(after_skip=skip, seconds=seconds, message_type=kind, tool_name=tool)
                  for seconds, skip, kind, tool in sorted(self.gaps, key=lambda gap: (-gap[0], gap[1]))],
            message_types=dict(types),
            other_types=self.types.total() + self.untracked["types"] - sum(count for _, count in types),
            tools=dict(tools),
            other_tools=self.tools.total() + self.untracked["tools"] - sum(count for _, count in tools),
            error_entries=self.error_entries, error_kinds=len(self.errors),
            errors=[ErrorKind(count=kind.count, first_skip=kind.first, last_skip=kind.last, message_type=key[0],
                              tool_name=key[1], message=key[2]) for key, kind in kinds[:MAX_ERROR_KINDS]],
            files=[FileTouch(path=path, count=count, tools=sorted(names))
                   for path, (count, names) in files[:MAX_FILES]],
            file_count=len(self.files), final_answer=self.final)


def _is_error(log: LogEntry) -> bool:
    """An ERROR step, a step whose type says it failed (PR_CREATION_FAILED), or one whose observation is an error;
    not DETECT_PR_ERRORS, a step that looks for errors."""
    kind = (log.message_type or "").upper()
    observed = log.observation
    return kind == "ERROR" or kind.endswith("_FAILED") or (
        isinstance(observed, dict) and ("error" in observed or "error_type" in observed))


def _error_text(log: LogEntry) -> str | None:
    for value in (log.observation, log.tool_output, log.thought):
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, dict) and value:
            message = next((value[key] for key in ERROR_KEYS if isinstance(value.get(key), str)), None)
            kind = value.get("error_type")
            if message is not None:
                return f"{kind}: {message}" if isinstance(kind, str) else message
            return compact_json(value)
    return None


def _answer_text(log: LogEntry) -> str | None:
    for value in (log.observation, log.thought):
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, dict) and value:
            return next((value[key] for key in ANSWER_KEYS if isinstance(value.get(key), str)), compact_json(value))
        if isinstance(value, list) and value:
            return compact_json(value)
    return None


def _paths(log: LogEntry) -> list[str]:
    """The files a step names: its tool input's file arguments, and `files_touched` where an output lists them."""
    found: list[str] = []
    if isinstance(log.tool_input, dict):
        found += [value for key in FILE_INPUTS if isinstance(value := log.tool_input.get(key), str) and value]
    for value in (log.observation, log.tool_output):
        touched = value.get(FILES_TOUCHED) if isinstance(value, dict) else None
        if isinstance(touched, list):
            found += [path for path in touched[:20] if isinstance(path, str) and path]
    return list(dict.fromkeys(found))


# Reading

Progress = Callable[[int, int | None], Awaitable[None]]


@dataclass
class Reading:
    """What a digest call read: the newest page's run fields, how far it got, and why it stopped short."""

    page: LogPage
    read: int
    next_skip: int | None
    digest: TraceDigest
    note: str | None = None  # why the call stopped before the end (with the service's words, if any)
    stopped: str | None = None  # the same in our own words only, for the summary


async def read_digest(client: AgentAutomationClient, agent_run_id: int, skip: int, limit: int, *, seconds: float,
                      progress: Progress) -> Reading:
    """Read from `skip` to the end, or as far as `seconds` and the pacing allow, reading the last page right after
    the first: a long trace's ending is known even when the middle is not read."""
    tally = Tally(client.credentials.token)
    started = time.monotonic()
    page = newest = await client.get_agent_run_logs(agent_run_id, skip=skip, limit=limit)  # newest: read last
    position = _fold(tally, skip, page.logs)
    more = trace_continues(page, position, limit)
    tail: LogPage | None = None
    tail_start: int | None = None
    note = stopped = None
    try:
        if more and page.total_logs is not None and page.total_logs - position > limit:
            tail = newest = await client.get_agent_run_logs(agent_run_id, skip=0, limit=limit, reverse=True)
            tail_start = (tail.total_logs or page.total_logs) - len(tail.logs)  # entries before `position`: read
        while more and (tail_start is None or position < tail_start):
            if time.monotonic() - started > seconds:
                note = stopped = f"stopped after {seconds:g} s"
                break
            await progress(position - skip, newest.total_logs)
            size = limit if tail_start is None else min(limit, tail_start - position)
            page = newest = await client.get_agent_run_logs(agent_run_id, skip=position, limit=size)
            position = _fold(tally, position, page.logs)
            more = trace_continues(page, position, size)
    except ApiError as exc:
        note, stopped = stopped_early(exc)
    reached = not more or (tail_start is not None and position >= tail_start)
    if tail is not None and tail_start is not None:
        for offset, log in enumerate(reversed(tail.logs)):
            if tail_start + offset >= position:
                tally.add(tail_start + offset, log)
    read = sum(last - first + 1 for first, last in tally.covered)
    return Reading(newest, read, None if reached else position, tally.digest(), note, stopped)


def stopped_early(exc: ApiError, how: str = "") -> tuple[str, str]:
    """Why a call that reads page after page stopped after the first: the note (with the service's message) and
    the summary's words (without it), each ending with `how` to go on, if given."""
    retry = f"; retry after {exc.retry_after:.1f} s" if exc.retry_after else ""
    then = f": {how}" if how else ""
    return f"stopped early ({exc.kind}: {exc.message}{retry}){then}", f"stopped early ({exc.kind}{retry}){then}"


def _fold(tally: Tally, position: int, logs: list[LogEntry]) -> int:
    for offset, log in enumerate(logs):
        tally.add(position + offset, log)
    return position + len(logs)


# Text

def digest_summary(agent_run_id: int, status: str | None, reading: Reading) -> str:
    """Counts and our own words: what a model reads first, with no text of the service's."""
    digest, total = reading.digest, reading.page.total_logs
    whole = reading.next_skip is None and len(digest.covered) == 1 and digest.covered[0][0] == 0
    read = f"read {reading.read} of {total if total is not None else 'unknown'} entries" + (
        " (the whole trace)" if whole else f" (skips {_stretches(digest.covered)})")
    ending = ("final answer at #" + str(digest.final_answer.skip)) if digest.final_answer else "no final answer read"
    why = f"; {reading.stopped}" if reading.stopped else ""
    more = "" if reading.next_skip is None else f"; digest again with skip={reading.next_skip} for the rest"
    return (f"Digest of run {agent_run_id}, {label(status)}: {read}; errors: {digest.error_entries} in "
            f"{digest.error_kinds} kinds; {ending}{why}{more}")


def render_digest(data: dict[str, Any]) -> str:
    """The digest's text: one line per part, each within its share of `DIGEST_TOKENS` (a list shows the items that
    fit and counts the rest), names bare where they are plain words, service text as short JSON strings."""
    digest = data["digest"]
    lines = [f"is_terminal={'true' if data.get('is_terminal') else 'false'}; #N is the entry at skip N"]
    if data.get("note"):
        lines.append(f"note: {quoted(data['note'], LINE_CHARS['note'])}")
    lines.append(_time_line(digest))
    lines.append(_counts("types", digest["message_types"], digest["other_types"], "entries of other types"))
    if digest["tools"]:
        lines.append(_counts("tools", digest["tools"], digest["other_tools"], "steps with other tools"))
    errors = [f"{kind['count']}× {_where(kind['first_skip'], kind['last_skip'])} "
              f"{_names(kind.get('message_type'), kind.get('tool_name'))}"
              f"{quoted(kind.get('message') or '(no message)', ERROR_CHARS)}" for kind in digest["errors"]]
    lines.append(bounded_line(f"errors: {digest['error_entries']} in {digest['error_kinds']} kinds",
                              LINE_CHARS["errors"], errors, digest["error_kinds"],
                              'more kinds: message_types=["ERROR"] lists them', "; "))
    if digest["files"]:
        files = [f"{quoted(touch['path'], PATH_CHARS)} {touch['count']}"
                 + (f" ({', '.join(_bare(tool) for tool in touch['tools'])})" if touch["tools"] else "")
                 for touch in digest["files"]]
        lines.append(bounded_line(f"files (from tool inputs, {FILES_TOUCHED})", LINE_CHARS["files"], files,
                                  digest["file_count"], "more"))
    answer = digest.get("final_answer")
    lines.append(f"final answer #{answer['skip']}: {quoted(answer['text'], LINE_CHARS['final answer'])}" if answer
                 else "final answer: none in what was read")
    return "\n".join(lines)


def _counts(head: str, counts: dict[str, int], others: int, what: str) -> str:
    """`head: name N, name N, M entries of other …`: the names that fit; those that do not are among the others."""
    items = [(f"{_bare(name)} {count}", count) for name, count in counts.items()]
    shown = fitting([item for item, _ in items], LINE_CHARS[head] - len(head) - MORE_CHARS, 2)
    others += sum(count for _, count in items[len(shown):])
    return f"{head}: " + ", ".join([*shown, *([f"{others} {what}"] if others else [])])


def _time_line(digest: dict[str, Any]) -> str:
    if digest.get("seconds") is None:
        return "time: no readable timestamps"
    first, last = instant(digest["first_at"]), instant(digest["last_at"])
    assert first is not None and last is not None
    until = f"{last:%H:%M:%S}" if first.date() == last.date() else f"{last:%Y-%m-%dT%H:%M:%SZ}"
    head = f"time: {first:%Y-%m-%dT%H:%M:%SZ} to {until} UTC, {_seconds(digest['seconds'])}"
    gaps = [f"{_seconds(gap['seconds'])} after #{gap['after_skip']} "
            f"{_names(gap.get('message_type'), gap.get('tool_name')).rstrip()}" for gap in digest["gaps"]]
    return bounded_line(f"{head}; longest gaps", LINE_CHARS["time"], gaps, len(gaps), "more") if gaps else head


def _seconds(seconds: float) -> str:
    return f"{seconds:g} s" if seconds < 10 else duration(int(seconds))


def _names(kind: str | None, tool: str | None) -> str:
    return "".join(f"{_bare(name)} " for name in (kind, tool) if name is not None)


def _bare(name: str) -> str:
    """A type or tool name as it is when it is a plain word (`label`), else quoted."""
    return name if label(name, "") == name else quoted(name, NAME_CHARS)


def _where(first: int, last: int) -> str:
    return f"#{first}" if first == last else f"#{first}–#{last}"


def _stretches(covered: list[tuple[int, int]]) -> str:
    return " and ".join(f"{first}–{last}" if first != last else str(first) for first, last in covered) or "none"
