"""The text of a trace page: one line per entry, in the fewest tokens that keep what a model reads a trace for.

The structured content keeps every field whole. The text leaves out what a model would read twice or not at all:
the page's fields the one-line summary already says, nulls, the date, hour and minute a line shares with the line above,
and a value repeated from an earlier line of the same result (written `#N`: as on the line of the entry at skip N,
which starts with `#N`). In a result of several entries a value longer than `FOLD_CHARS` is folded, and its line
says how to read it whole (`skip=N limit=1`: a result of one entry folds nothing).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from .results import compact_json

FOLD_CHARS: Final = 240  # of a value's text, in a result of several entries
REPEAT_CHARS: Final = 24  # a value this long or longer is written once per result, then `#N`
# Written by the summary line, which comes first: the text does not say them again.
SAID_IN_SUMMARY: Final = frozenset({"agent_run_id", "status", "total_logs", "read", "next_skip"})
FIELDS: Final = (("tool_input", "in"), ("tool_output", "out"), ("observation", "obs"))
TRACE_LEGEND: Final = ("entries, one a line: time (UTC; :SS in the minute above) message_type tool_name: thought | "
                       "in: tool_input | out: tool_output | obs: observation (objects as key=value, values JSON)")
REPEAT_LEGEND: Final = "#N: the same value as on the line that starts with #N (the entry at skip N)"
FOLD_LEGEND: Final = "…+C: C more characters; skip=N limit=1 reads the entry whole (#N starts its line)"
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_REFERENCE: Final = re.compile(r"#\d+")


def render_trace(page: dict[str, Any], positions: Sequence[int] | None = None, *, note_said: bool = True) -> str:
    """`page` (a trace page's structured content) as text: its fields the summary does not say, a legend, then one
    line per entry. `positions` are the entries' skips in the trace, oldest first; without them (a newest-first
    page of a trace of unknown length) nothing is written as a repeat or folded. `note_said` tells whether the
    summary carries the note word for word. Service text is written escaped (a line break as `\\n`), so no entry
    can pass for another."""
    entries = page.get("entries") or []
    lines, repeated, folded = _entry_lines(entries, positions)
    head = " ".join(f"{name}={_scalar(value)}" for name, value in page.items()
                    if name not in SAID_IN_SUMMARY and name not in ("entries", "note", "digest")
                    and value is not None and not (name == "trimmed_fields" and value == 0))
    legend = [TRACE_LEGEND, *([REPEAT_LEGEND] if repeated else []), *([FOLD_LEGEND] if folded else [])]
    note = [f"note: {_flat(page['note'])}"] if page.get("note") and not note_said else []
    return "\n".join([*([head] if head else []), *note, "; ".join(legend) + ":", *lines])


def _entry_lines(entries: list[dict[str, Any]], positions: Sequence[int] | None) -> tuple[list[str], bool, bool]:
    """The entries' lines, and whether any value was written as a repeat, and whether any was folded."""
    fold = positions is not None and len(entries) > 1
    seen: dict[tuple[str, str], int] = {}  # (field, text) -> the position that wrote it first
    repeated: set[int] = set()  # positions whose line starts with #N because a later line repeats a value of it
    folded: set[int] = set()  # and those because a value of it is folded
    lines: list[tuple[int | None, str]] = []
    minute = None

    def written(name: str, text: str, position: int | None) -> str:
        if position is None:
            return text
        if len(text) >= REPEAT_CHARS:
            first = seen.setdefault((name, text), position)
            if first != position:
                repeated.add(first)
                return f"#{first}"
        if fold and len(text) > FOLD_CHARS:
            folded.add(position)
            return _folded(text)
        return text

    for entry, position in zip(entries, positions or [None] * len(entries), strict=False):
        stamp, minute = _when(entry.get("created_at"), minute)
        what = " ".join(_flat(str(entry[key])) for key in ("message_type", "tool_name") if entry.get(key) is not None)
        line = " ".join(part for part in (stamp, what) if part)
        if entry.get("thought") is not None:
            thought = _flat(str(entry["thought"]))
            if _REFERENCE.fullmatch(thought):  # a thought that reads like a repeat is quoted
                thought = compact_json(thought)
            line = f"{line}: {written('thought', thought, position)}"
        parts = [line] + [f"{short}: {written(key, _value(entry[key]), position)}" for key, short in FIELDS
                          if key in entry]
        lines.append((position, " | ".join(parts)))
    marked = repeated | folded
    return ([f"#{position} {line}" if position in marked else line for position, line in lines], bool(repeated),
            bool(folded))


def _folded(text: str) -> str:
    """The first `FOLD_CHARS` characters and how many more there are; never half an escape."""
    head = text[:FOLD_CHARS]
    trailing = len(head) - len(head.rstrip("\\"))
    if trailing % 2:
        head = head[:-1]
    return f"{head}…+{len(text) - len(head)}"


def _when(created_at: Any, minute: str | None) -> tuple[str, str | None]:
    """`:SS` within the minute of the line above, `HH:MM:SS` within its day, else the whole instant; anything
    unreadable as it came."""
    if not isinstance(created_at, str):
        return "", minute
    try:
        moment = datetime.fromisoformat(created_at).astimezone(UTC)
    except ValueError:  # quoted: it cannot pass for a line's #N
        return compact_json(created_at), minute
    this_minute = moment.strftime("%Y-%m-%dT%H:%M")
    if this_minute == minute:
        return moment.strftime(":%S"), this_minute
    if minute is not None and this_minute[:10] == minute[:10]:
        return moment.strftime("%H:%M:%S"), this_minute
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ"), this_minute


def _scalar(value: Any) -> str:
    """A page's field: a word or number as it is, text escaped, anything else as compact JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return _flat(value) if isinstance(value, str) else compact_json(value)


def _value(value: Any) -> str:
    """An object as `key=value` pairs, keys bare where they are plain names; everything else, and every value of an
    object, as compact JSON (one line: JSON escapes line breaks)."""
    if isinstance(value, dict) and value:
        return " ".join(f"{key if _NAME.fullmatch(key) else compact_json(key)}={compact_json(item)}"
                        for key, item in value.items())
    return compact_json(value)


def _flat(text: str) -> str:
    """One line: line breaks and other escapes as JSON writes them, without the quotes."""
    return json.dumps(text, ensure_ascii=False)[1:-1]
