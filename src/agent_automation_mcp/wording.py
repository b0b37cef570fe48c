"""How our own sentences list things: `a, b and c`, `merge, approve or review`, wherever a message names several."""

from __future__ import annotations

from collections.abc import Sequence


def listed(items: Sequence[str], conjunction: str = "and") -> str:
    """`a`, `a and b`, `a, b and c` (`conjunction` before the last); empty for none."""
    if len(items) < 2:
        return "".join(items)
    return f"{', '.join(items[:-1])} {conjunction} {items[-1]}"
