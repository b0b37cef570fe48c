"""The text of a trace page: one line per entry, in the fewest tokens that keep what a model reads a trace for.

The structured content keeps every field whole. The text leaves out what a model would read twice or not at all:
the page's fields the one-line summary already says, nulls, the date, hour and minute a line shares with the line above,
and a value repeated from an earlier line of the same result (written `#N`: as on the line of the entry at skip N,
which starts with `#N`). In a result of several entries a value longer than `FOLD_CHARS` is folded, and its line
says how to read it whole (`skip=N limit=1`: a result of one entry folds nothing).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from .line_text import flat, fold, scalar, value_text, when
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
_REFERENCE: Final = re.compile(r"#\d+")


def render_trace(page: dict[str, Any], positions: Sequence[int] | None = None, *, note_said: bool = True) -> str:
    """`page` (a trace page's structured content) as text: its fields the summary does not say, a legend, then one
    line per entry. `positions` are the entries' skips in the trace, oldest first; without them (a newest-first
    page of a trace of unknown length) nothing is written as a repeat or folded. `note_said` tells whether the
    summary carries the note word for word. Service text is written escaped (a line break as `\\n`), so no entry
    can pass for another."""
    entries = page.get("entries") or []
    lines, repeated, folded = _entry_lines(entries, positions)
    head = " ".join(f"{name}={scalar(value)}" for name, value in page.items()
                    if name not in SAID_IN_SUMMARY and name not in ("entries", "note", "digest")
                    and value is not None and not (name == "trimmed_fields" and value == 0))
    legend = [TRACE_LEGEND, *([REPEAT_LEGEND] if repeated else []), *([FOLD_LEGEND] if folded else [])]
    note = [f"note: {flat(page['note'])}"] if page.get("note") and not note_said else []
    return "\n".join([*([head] if head else []), *note, "; ".join(legend) + ":", *lines])


def _entry_lines(entries: list[dict[str, Any]], positions: Sequence[int] | None) -> tuple[list[str], bool, bool]:
    """The entries' lines, and whether any value was written as a repeat, and whether any was folded."""
    folding = positions is not None and len(entries) > 1
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
        if folding and len(text) > FOLD_CHARS:
            folded.add(position)
            return fold(text, FOLD_CHARS)
        return text

    for entry, position in zip(entries, positions or [None] * len(entries), strict=False):
        stamp, minute = when(entry.get("created_at"), minute)
        what = " ".join(flat(str(entry[key])) for key in ("message_type", "tool_name") if entry.get(key) is not None)
        line = " ".join(part for part in (stamp, what) if part)
        if entry.get("thought") is not None:
            thought = flat(str(entry["thought"]))
            if _REFERENCE.fullmatch(thought):  # a thought that reads like a repeat is quoted
                thought = compact_json(thought)
            line = f"{line}: {written('thought', thought, position)}"
        parts = [line] + [f"{short}: {written(key, value_text(entry[key]), position)}" for key, short in FIELDS
                          if key in entry]
        lines.append((position, " | ".join(parts)))
    marked = repeated | folded
    return ([f"#{position} {line}" if position in marked else line for position, line in lines], bool(repeated),
            bool(folded))
