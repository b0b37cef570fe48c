"""The toolsets' names, their listing order and which ones a server offers when none are chosen.

Settings parse `--toolsets` and `AGENT_AUTOMATION_TOOLSETS` from this module alone, so `config` never
imports a tool (and no tool's module, which reads the settings, can close a circle through it). What
each toolset holds and its one-line description sit in its own module, `tools/<name>.py`;
`tools/registry.py` joins the two and refuses a name declared in one place and not the other.
"""

from __future__ import annotations

from typing import Final

# The MCP server's toolsets, in listing order (`tools/list`, `--help`, `--toolsets all`).
TOOLSETS: Final = ("runs", "logs", "checks", "pulls", "settings", "org", "setup", "oauth", "webhooks")
OPT_IN_TOOLSETS: Final = ("oauth", "webhooks")  # offered only when asked for by name (or `all`)
DEFAULT_TOOLSETS: Final = tuple(name for name in TOOLSETS if name not in OPT_IN_TOOLSETS)
KEYWORDS: Final = ("all", "default")  # words `--toolsets` reads as more than one toolset


def parse_toolsets(value: str | None) -> tuple[str, ...]:
    """`runs,logs` → those toolsets; `all` and `default` are keywords; empty → the default ones."""
    if value is None or not value.strip():
        return DEFAULT_TOOLSETS
    chosen: list[str] = []
    for item in (part.strip().lower() for part in value.split(",")):
        names = TOOLSETS if item == "all" else DEFAULT_TOOLSETS if item == "default" else (item,) if item else ()
        for name in names:
            if name not in TOOLSETS:
                raise ValueError(f"unknown toolset {name!r}; known: {', '.join(TOOLSETS)} (or {', '.join(KEYWORDS)})")
            if name not in chosen:
                chosen.append(name)
    return tuple(t for t in TOOLSETS if t in chosen)
