"""The text of a trace page: one line per entry, in the fewest tokens that keep what a model reads a trace for.

The structured content keeps every field whole. The text leaves out what a model would read twice or not at all:
the page's fields the one-line summary already says, nulls, the date, hour and minute a line shares with the line above,
and a value, or a member of an object, repeated from an earlier line of the same result (written `#N`: as on the line
of the entry at skip N, which starts with `#N`). A tool call reads as one, `tool(input) → output`, and objects as
`key=value` with plain words unquoted. In a result of several entries a value longer than `FOLD_CHARS` is folded, and
its line says how to read it whole (`skip=N limit=1`: a result of one entry folds nothing).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .line_text import TIME_LEGEND, flat, fold, member_texts, scalar, value_text, when
from .results import compact_json

FOLD_CHARS: Final = 240  # of a value's text, in a result of several entries
REPEAT_CHARS: Final = 24  # a value this long or longer is written once per result, then `#N`
# Written by the summary line, which comes first: the text does not say them again.
SAID_IN_SUMMARY: Final = frozenset({"agent_run_id", "status", "total_logs", "read", "next_skip"})
TRACE_LEGEND: Final = ("entries, one a line: time message_type tool_name(tool_input) → tool_output: thought | "
                       f"observation (objects as key=value, values JSON, plain words unquoted); {TIME_LEGEND}")
REPEAT_LEGEND: Final = ("#N: the same value as on the line that starts with #N (the entry at skip N); =#N: all its "
                        "values as there")
FOLD_LEGEND: Final = "…+C: C more characters; skip=N limit=1 reads the entry whole (#N starts its line)"
_REFERENCE: Final = re.compile(r"#\d+")


@dataclass(frozen=True, slots=True)
class _Value:
    """A field of an entry as its line writes it, between `before` and `after`; an object member by member."""

    before: str
    place: str  # where a repeat of it is looked for: the field
    text: str
    members: tuple[tuple[str, str], ...] = ()  # an object's (key, value) texts
    after: str = ""


def render_trace(page: dict[str, Any], positions: Sequence[int] | None = None, *, note_said: bool = True) -> str:
    """`page` (a trace page's structured content) as text: its fields the summary does not say, a legend, then one
    line per entry. `positions` are the entries' skips in the trace, oldest first; without them (a newest-first
    page of a trace of unknown length) nothing is written as a repeat or folded. `note_said` tells whether the
    summary carries the note word for word. Service text is written escaped (a line break as `\\n`), so no entry
    can pass for another."""
    entries = page.get("entries") or []
    lines, repeated, folded = _lines(entries, positions)
    head = " ".join(f"{name}={scalar(value)}" for name, value in page.items()
                    if name not in SAID_IN_SUMMARY and name not in ("entries", "note", "digest")
                    and value is not None and not (name == "trimmed_fields" and value == 0))
    legend = [TRACE_LEGEND, *([REPEAT_LEGEND] if repeated else []), *([FOLD_LEGEND] if folded else [])]
    note = [f"note: {flat(page['note'])}"] if page.get("note") and not note_said else []
    return "\n".join([*([head] if head else []), *note, "; ".join(legend) + ":", *lines])


def _values(entry: dict[str, Any]) -> list[_Value]:
    """An entry's fields after its time and names, in the order its line writes them."""
    values: list[_Value] = []
    if "tool_input" in entry:
        values.append(_object("(", "in", entry["tool_input"], ")"))
    if "tool_output" in entry:
        values.append(_object(" → ", "out", entry["tool_output"]))
    if entry.get("thought") is not None:
        thought = flat(str(entry["thought"]))
        if _REFERENCE.fullmatch(thought) or " | " in thought:  # one that reads like a repeat or ends early: quoted
            thought = compact_json(thought)
        values.append(_Value(": ", "thought", thought))
    if "observation" in entry:
        values.append(_object(" | ", "obs", entry["observation"]))
    return values


def _object(before: str, place: str, value: Any, after: str = "") -> _Value:
    members = tuple(member_texts(value))
    return _Value(before, place, " ".join(f"{key}={text}" for key, text in members) if members else value_text(value),
                  members, after)


@dataclass
class _Repeats:
    """The values of `REPEAT_CHARS` or more that lines of one result show whole, by place, and the lines named."""

    seen: dict[tuple[str, str], int] = field(default_factory=dict)  # (place, text) -> the position showing it first
    targets: set[int] = field(default_factory=set)

    def of(self, place: str, text: str, position: int | None) -> str | None:
        """`#N` where an earlier line shows `text` in `place`, else None."""
        first = self.seen.get((place, text)) if position is not None and len(text) >= REPEAT_CHARS else None
        if first is None:
            return None
        self.targets.add(first)
        return f"#{first}"

    def shown(self, place: str, text: str, position: int | None) -> None:
        if position is not None and len(text) >= REPEAT_CHARS:
            self.seen.setdefault((place, text), position)


def _lines(entries: list[dict[str, Any]], positions: Sequence[int] | None) -> tuple[list[str], bool, bool]:
    """The entries' lines; and whether any value was written as a repeat, and whether any was folded."""
    folding = positions is not None and len(entries) > 1
    repeats = _Repeats()
    folded: set[int] = set()  # positions whose line starts with #N because a value of it is folded
    lines: list[tuple[int | None, str]] = []
    minute = None
    numbered: Sequence[int | None] = positions or [None] * len(entries)
    for entry, position in zip(entries, numbered, strict=False):
        stamp, minute = when(entry.get("created_at"), minute)
        names = " ".join(flat(str(entry[key])) for key in ("message_type", "tool_name") if entry.get(key) is not None)
        line = " ".join(part for part in (stamp, names) if part)
        values = _values(entry)
        whole = ("entry " + names, "\n".join(f"{value.place} {value.text}" for value in values))  # one line each
        same = repeats.of(*whole, position)
        if same is not None:  # every value as on an earlier line
            lines.append((position, f"{line} ={same}"))
            continue
        for value in values:
            text = repeats.of(value.place, value.text, position)
            if text is None:
                text, cut = _written(value, position, repeats, FOLD_CHARS if folding else None)
                if cut and position is not None:
                    folded.add(position)
            line += f"{value.before}{text}{value.after}"
        repeats.shown(*whole, position)
        lines.append((position, line))
    marked = repeats.targets | folded
    return ([f"#{position} {line}" if position in marked else line for position, line in lines],
            bool(repeats.targets), bool(folded))


def _written(value: _Value, position: int | None, repeats: _Repeats, chars: int | None) -> tuple[str, bool]:
    """The value's text, with members that repeat an earlier line as `#N`, folded past `chars` (None: never); and
    whether it was folded. What it shows whole, later lines may repeat."""
    members = [(f"{value.place}.{key}", key, member) for key, member in value.members]
    parts = [f"{key}={repeats.of(place, member, position) or member}" for place, key, member in members]
    text = " ".join(parts) if parts else value.text
    cut = chars is not None and len(text) > chars
    if chars is not None and cut:
        text = fold(text, chars)
    shown = text.rindex("…+") if cut else len(text)  # what the line shows whole
    end = -1
    for (place, _, member), part in zip(members, parts, strict=True):
        end += len(part) + 1
        if end <= shown:
            repeats.shown(place, member, position)
    if not cut:
        repeats.shown(value.place, value.text, position)
    return text, cut
