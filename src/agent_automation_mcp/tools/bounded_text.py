"""A line of items within a share of characters, what does not fit counted, and service text quoted within a length:
for the answers that must stay short whatever they hold (a trace's digest, runs counted).

Loaded at a server's start by the tools that write such answers, unlike `line_text` (whose lists wait for their
first call): it imports nothing else of ours to render.
"""

from __future__ import annotations

from typing import Final

from .results import compact_json

MORE_CHARS: Final = 40  # room kept at the end of a bounded line for what it leaves out


def bounded_line(head: str, share: int, items: list[str], total: int, more: str, separator: str = ", ") -> str:
    """`head: item, item, N more` in at most `share` characters: the items that fit, and how many of `total` not."""
    shown = fitting(items, share - len(head) - MORE_CHARS, len(separator))
    left = total - len(shown)
    parts = [*shown, *([f"{left} {more}"] if left else [])]
    return f"{head}: {separator.join(parts)}" if parts else head


def fitting(items: list[str], room: int, separator: int) -> list[str]:
    """The first `items` that fit in `room` characters, each with its `separator`."""
    shown: list[str] = []
    for item in items:
        room -= len(item) + separator
        if room < 0:
            break
        shown.append(item)
    return shown


def quoted(text: str, max_chars: int) -> str:
    """`text` as a JSON string of at most `max_chars` characters between its quotes, cut (…) to fit its escapes."""
    written = compact_json(text)
    keep = len(text)
    while len(written) > max_chars + 2 and keep > 0:
        keep = max(0, keep - (len(written) - max_chars - 2) // 2 - 1)
        written = compact_json(text[:keep] + "…")
    return written
