"""A toolset and its tools, declared next to their handlers.

Each toolset module starts with `toolset = Toolset(...)` and decorates its handlers with `toolset.tool(...)`.
A tool names the operations of the table it may send; its annotations are derived from those entries,
never written by hand. `registry` lists the toolsets and decides which tools a server offers.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcp.types import ToolAnnotations

from ..api.operations import OPERATIONS
from ..toolsets import OPT_IN_TOOLSETS, TOOLSETS


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
        # destructiveHint and idempotentHint only mean something for tools that write. A hint at the protocol's
        # default (readOnlyHint false, openWorldHint true: every tool reaches the service) is left out: it means
        # the same to every client and cost 145 tokens of each tools/list.
        return ToolAnnotations(
            read_only_hint=self.read_only or None,
            destructive_hint=None if self.read_only else self.destructive,
            idempotent_hint=None if self.read_only else self.idempotent,
        )


class Toolset:
    """One toolset, declared once at the top of its module: its name (one of `toolsets.TOOLSETS`), the line
    a person reads about it in `--help` and the README, and its tools in the order they are declared."""

    def __init__(self, name: str, about: str) -> None:
        if name not in TOOLSETS:
            raise ValueError(f"toolset {name!r} is not named in toolsets.py (TOOLSETS)")
        self.name = name
        self.about = about
        self.tools: list[ToolSpec] = []

    @property
    def names(self) -> frozenset[str]:
        return frozenset(spec.name for spec in self.tools)

    @property
    def default(self) -> bool:
        """Offered when no toolsets are chosen (`toolsets.OPT_IN_TOOLSETS` lists the others)."""
        return self.name not in OPT_IN_TOOLSETS

    def tool(self, title: str, *operations: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(handler: Callable[..., Any]) -> Callable[..., Any]:
            self.tools.append(ToolSpec(handler.__name__, self.name, title, operations, handler))
            return handler

        return register
