"""What every one-line-per-item text shares (a trace page, a list of runs): service text on one line, values folded
with how much more there is, times written short against the line above."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any, Final

from .results import compact_json

# What `when` writes, for the legend of every text that uses it: a model reads a time alone only with this.
TIME_LEGEND: Final = "times UTC, whole or short: HH:MM:SS on the day of the time written before it, :SS in its minute"
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
# A string written without quotes (as logfmt does): it cannot pass for a number, a literal, a `#N`, or run into the
# separators around it (space, `,`, `(`, `)`, `|`, `: `, `=`).
_WORD: Final = re.compile(r"[A-Za-z_/.][A-Za-z0-9_/.:@+-]*(?<!:)")
_LITERALS: Final = frozenset({"true", "false", "null", "none", "nan", "infinity"})


def flat(text: str) -> str:
    """One line: line breaks and other escapes as JSON writes them, without the quotes."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def fold(text: str, chars: int) -> str:
    """The first `chars` characters and how many more there are (`…+C`); never half an escape."""
    head = text[:chars]
    trailing = len(head) - len(head.rstrip("\\"))
    if trailing % 2:
        head = head[:-1]
    return f"{head}…+{len(text) - len(head)}"


def when(created_at: Any, minute: str | None) -> tuple[str, str | None]:
    """`:SS` within the minute of the time written before (`minute`), `HH:MM:SS` within its day, else the whole
    instant; anything unreadable as it came. Returns the text and the minute the next time is written against, so
    each time is read against the one before it in the text (`TIME_LEGEND`)."""
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


def scalar(value: Any) -> str:
    """A field: a word or number as it is, text escaped, anything else as compact JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return flat(value) if isinstance(value, str) else compact_json(value)


def value_text(value: Any) -> str:
    """An object as `key=value` pairs (`member_texts`); anything else as compact JSON (one line: JSON escapes line
    breaks)."""
    if isinstance(value, dict) and value:
        return " ".join(f"{key}={text}" for key, text in member_texts(value))
    return compact_json(value)


def member_texts(value: Any) -> list[tuple[str, str]]:
    """An object's members as (key, value) texts: keys bare where they are plain names, values as compact JSON but
    plain words unquoted; nothing for anything else."""
    if not isinstance(value, dict):
        return []
    return [(key if _NAME.fullmatch(key) else compact_json(key),
             item if isinstance(item, str) and _WORD.fullmatch(item) and item.casefold() not in _LITERALS
             else compact_json(item))
            for key, item in value.items()]
