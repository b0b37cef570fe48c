"""A toolset and its tools, declared next to their handlers.

Each toolset module starts with `toolset = Toolset(...)` and decorates its handlers with `toolset.tool(...)`.
A tool names the operations of the table it may send; its annotations are derived from those entries,
never written by hand. `registry` lists the toolsets and decides which tools a server offers.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from mcp.types import ToolAnnotations

from ..api.operations import OPERATIONS

KEYWORDS: Final = ("all", "default")  # words `--toolsets` reads as more than one toolset


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
    """One toolset, declared once at the top of its module: its name, whether a server offers it when no
    toolsets are chosen, the line a person reads about it in `--help` and the README, and its tools in the
    order they are declared."""

    def __init__(self, name: str, about: str, *, default: bool = True) -> None:
        if not name.isidentifier() or name != name.lower() or name in KEYWORDS:
            raise ValueError(f"a toolset's name is a lower-case word other than {' or '.join(KEYWORDS)}, got {name!r}")
        self.name = name
        self.about = about
        self.default = default
        self.tools: list[ToolSpec] = []

    def tool(self, title: str, *operations: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(handler: Callable[..., Any]) -> Callable[..., Any]:
            self.tools.append(ToolSpec(handler.__name__, self.name, title, operations, handler))
            return handler

        return register
