"""Toolsets, and the one place the toolset and read-only filters are applied.

Each toolset module declares its tools next to their handlers with `Toolset.tool(...)`. A tool names
the operations of the table it may send; its annotations are derived from those entries, never
written by hand. `select_tools` decides what a server offers; the server registers exactly that,
so the same choice holds when tools are listed and when they are called.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from mcp.types import ToolAnnotations

from ..api.operations import OPERATIONS
from ..config import TOOLSETS, ServerSettings

# Operations of the table that no tool sends, and why (the coverage test holds every other one to a tool).
OPERATIONS_WITHOUT_TOOL: Final = MappingProxyType({
    "list_mcp_providers": "the catalogue of OAuth/MCP providers the web app can connect: nothing an assistant acts "
                          "on here (get_oauth_token_status shows the user's own connections)",
    "get_cli_rules": "rules text for the service's own command-line agent; long, and of no use to a model "
                     "driving agent runs",
})


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    toolset: str
    title: str
    operations: tuple[str, ...]
    handler: Callable[..., Any] = field(repr=False)

    def __post_init__(self) -> None:
        unknown = [op for op in self.operations if op not in OPERATIONS]
        if not self.operations or unknown:
            raise ValueError(f"tool {self.name}: operations must name entries of the table, got {unknown or 'none'}")

    @property
    def description(self) -> str:
        return inspect.cleandoc(self.handler.__doc__ or "")

    @property
    def read_only(self) -> bool:
        return all(OPERATIONS[op].read_only for op in self.operations)

    @property
    def destructive(self) -> bool:
        return any(OPERATIONS[op].destructive for op in self.operations)

    @property
    def idempotent(self) -> bool:
        return all(OPERATIONS[op].idempotent for op in self.operations)

    @property
    def annotations(self) -> ToolAnnotations:
        # destructiveHint and idempotentHint only mean something for tools that write.
        return ToolAnnotations(
            read_only_hint=self.read_only,
            destructive_hint=None if self.read_only else self.destructive,
            idempotent_hint=None if self.read_only else self.idempotent,
            open_world_hint=True,
        )


class Toolset:
    """The tools of one toolset, in the order they are declared."""

    def __init__(self, name: str) -> None:
        if name not in TOOLSETS:
            raise ValueError(f"unknown toolset {name!r}")
        self.name = name
        self.tools: list[ToolSpec] = []

    def tool(self, title: str, *operations: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(handler: Callable[..., Any]) -> Callable[..., Any]:
            self.tools.append(ToolSpec(handler.__name__, self.name, title, operations, handler))
            return handler

        return register


def all_tools() -> list[ToolSpec]:
    """Every tool of every toolset, in toolset order."""
    from . import checks, logs, oauth, org, pulls, runs, settings, setup, webhooks

    modules = {m.toolset.name: m.toolset for m in (runs, logs, checks, pulls, settings, org, setup, oauth, webhooks)}
    return [spec for name in TOOLSETS for spec in modules[name].tools]


def select_tools(settings: ServerSettings) -> list[ToolSpec]:
    """The toolset filter and the read-only ceiling, applied once for both listing and calling."""
    return [spec for spec in all_tools()
            if spec.toolset in settings.toolsets and (spec.read_only or not settings.read_only)]
