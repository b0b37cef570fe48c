"""The toolsets in listing order, and the one place the toolset and read-only filters are applied.

The toolsets' names, order and default choice are in `toolsets.py` (a leaf the settings read); each
toolset's description and tools are at the top of its own module (`tools/<name>.py`); `TOOLSETS_DECLARED`
below joins the two, and `--help` and the README's list are derived from it. `select_tools` decides what
a server offers, and `narrowed` what one HTTP request may see of it; the server registers exactly that, so
the same choice holds when tools are listed and when they are called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Final

from ..api.settings import parse_flag
from ..config import ServerSettings
from ..headers import READONLY_HEADER, TOOLSETS_HEADER, HeaderError
from ..toolsets import DEFAULT_TOOLSETS, KEYWORDS, OPT_IN_TOOLSETS, TOOLSETS, parse_toolsets
from . import checks, logs, oauth, org, pulls, runs, settings, setup, webhooks
from .declarations import Toolset, ToolSpec

__all__ = ["DEFAULT_TOOLSETS", "KEYWORDS", "OPERATIONS_WITHOUT_TOOL", "OPT_IN_TOOLSETS", "TOOLSETS",
           "TOOLSETS_DECLARED", "all_tools", "narrowed", "offered_names", "parse_toolsets", "select_tools",
           "toolsets_help", "usable"]


def _in_listing_order(*declared: Toolset) -> tuple[Toolset, ...]:
    by_name = {toolset.name: toolset for toolset in declared}
    if sorted(by_name) != sorted(TOOLSETS) or len(by_name) != len(declared):
        raise RuntimeError(f"toolsets.py names {sorted(TOOLSETS)}, the modules declare {sorted(by_name)}")
    return tuple(by_name[name] for name in TOOLSETS)


# The MCP server's toolsets, in the listing order `toolsets.py` gives.
TOOLSETS_DECLARED: Final = _in_listing_order(*(module.toolset for module in (
    runs, logs, checks, pulls, settings, org, setup, oauth, webhooks)))

# Operations of the table that no tool sends, and why (the coverage test holds every other one to a tool).
OPERATIONS_WITHOUT_TOOL: Final = MappingProxyType({
    "list_mcp_providers": "the catalogue of OAuth/MCP providers the web app can connect: nothing an assistant acts "
                          "on here (get_oauth_token_status shows the user's own connections)",
    "get_cli_rules": "rules text for the service's own command-line agent; long, and of no use to a model "
                     "driving agent runs",
})


def toolsets_help() -> str:
    """One line per toolset, as `--help` shows them."""
    width = max(len(name) for name in TOOLSETS)
    return "\n".join(f"  {t.name:<{width}}  {t.about}{'' if t.default else ' (opt-in)'}" for t in TOOLSETS_DECLARED)


def all_tools() -> list[ToolSpec]:
    """Every tool of every toolset, in toolset order."""
    return [spec for toolset in TOOLSETS_DECLARED for spec in toolset.tools]


def usable(spec: ToolSpec, *, read_only: bool) -> bool:
    """The read-only rule: under a read-only ceiling (the operator's, a request's header or a read-only sign-in's),
    only a tool that writes nothing. What is listed, what the guide names and what the gate lets a read-only sign-in
    call all ask this."""
    return spec.read_only or not read_only


def select_tools(settings: ServerSettings) -> list[ToolSpec]:
    """The toolset filter and the read-only ceiling, applied once for both listing and calling."""
    return [spec for spec in all_tools()
            if spec.toolset in settings.toolsets and usable(spec, read_only=settings.read_only)]


@lru_cache(maxsize=256)  # one per distinct narrowing of the settings: a handful, bounded whatever headers say
def offered_names(settings: ServerSettings) -> frozenset[str]:
    """The names of the tools `select_tools` offers, for the checks made on every list and call."""
    return frozenset(spec.name for spec in select_tools(settings))


def narrowed(settings: ServerSettings, headers: Mapping[str, str] | None) -> ServerSettings:
    """The operator's toolsets and read-only ceiling, narrowed (never widened) by `X-MCP-Toolsets` and
    `X-MCP-Readonly`. Read by the HTTP gate (to answer 400 before any tool runs) and by the server (to list
    and call), so the two can never disagree."""
    if not headers:
        return settings
    return _narrowed(settings, headers.get(TOOLSETS_HEADER, "").strip(), headers.get(READONLY_HEADER, "").strip())


@lru_cache(maxsize=256)  # a handful of distinct header values in practice; bounded whatever callers send
def _narrowed(settings: ServerSettings, toolsets: str, read_only: str) -> ServerSettings:
    if toolsets:
        try:
            asked = parse_toolsets(toolsets)
        except ValueError as exc:
            raise HeaderError(f"X-MCP-Toolsets: {exc}") from None
        settings = dataclasses.replace(settings, toolsets=tuple(t for t in settings.toolsets if t in asked))
    if read_only:
        try:
            narrowed = parse_flag("X-MCP-Readonly", read_only)
        except ValueError as exc:
            raise HeaderError(str(exc)) from None
        if narrowed:
            settings = dataclasses.replace(settings, read_only=True)
    return settings
