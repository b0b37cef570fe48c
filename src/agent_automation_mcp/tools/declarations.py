"""A toolset and its tools, declared next to their handlers.

Each toolset module starts with `toolset = Toolset(...)` and decorates its handlers with `toolset.tool(...)`.
A tool declares what it is, and the rest is derived from the declaration: the operations of the table it may send
(its annotations, and what it does to an agent run, come from those entries, never written by hand), the field of its
result naming the run it starts or continues (`run_field`: the tasks extension offers it as a task), whether the runs
view draws its result (`viewed`: the view binds itself to it), and whether it comes closest to stopping a run while no
operation does (`closest_to_stop`). `registry` lists the toolsets and decides which tools a server offers.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from mcp.types import ToolAnnotations
from pydantic import BaseModel

from ..api.operations import OPERATIONS, RUN_STOPPERS, RunEffect
from ..toolsets import OPT_IN_TOOLSETS, TOOLSETS

# What the description of the tool that comes closest to stopping a run says while no operation stops one.
CLOSEST_TO_STOP_SAYS: Final = "No tool cancels a run: this comes closest."
TABLE: Final = "src/agent_automation_mcp/api/operations.py"


def source_file(declared: Any) -> str:
    """The file a function or class is declared in, from the checkout's root: what a message says to edit."""
    return f"src/{declared.__module__.replace('.', '/')}.py"


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    toolset: str
    title: str
    operations: tuple[str, ...]
    handler: Callable[..., Any] = field(repr=False)
    run_field: str | None = None  # the result's field naming the run it starts or continues
    viewed: bool = False  # the runs view draws its result
    closest_to_stop: bool = False  # what comes closest to stopping a run while no operation stops one

    def __post_init__(self) -> None:
        unknown = [op for op in self.operations if op not in OPERATIONS]
        if not self.operations or unknown:
            raise ValueError(f"tool {self.name} in {self.source}: toolset.tool(...) must name operations of the table "
                             f"({TABLE}), got {unknown or 'none'}")
        effects = {OPERATIONS[op].run for op in self.operations} - {RunEffect.NOTHING}
        if len(effects) > 1:
            raise ValueError(f"tool {self.name} sends operations that do different things to an agent run "
                             f"({', '.join(sorted(effect.value for effect in effects))}, by their run= in {TABLE}): "
                             f"make one tool of each in {self.source}")
        self._check_run_field()

    def _check_run_field(self) -> None:
        """`run_field` is declared exactly when the tool starts or continues a run, which its operations say."""
        effect = self.run_effect
        sending = next((op for op in self.operations if OPERATIONS[op].run is effect), None)
        if effect.sets_going and self.run_field is None:
            raise ValueError(f"tool {self.name} sends {sending}, which {effect.value} (run=RunEffect.{effect.name} on "
                             f"its line in {TABLE}): declare the field of its result that names the run, "
                             f"toolset.tool(..., run_field=\"id\") in {self.source}, so that it is offered as a task")
        if self.run_field is not None and not effect.sets_going:
            raise ValueError(f"tool {self.name} declares run_field, but none of its operations starts or continues an "
                             f"agent run (their run= in {TABLE}: RunEffect.{effect.name}): leave run_field out in "
                             f"{self.source}")

    @property
    def run_effect(self) -> RunEffect:
        """What the tool does to an agent run: what its operations do (`RunEffect`, one per tool)."""
        return next((effect for op in self.operations if (effect := OPERATIONS[op].run) is not RunEffect.NOTHING),
                    RunEffect.NOTHING)

    @property
    def stops_with(self) -> str | None:
        """The operation it stops a run with, which a task's cancel sends; None for a tool that stops none."""
        return next((op for op in self.operations if OPERATIONS[op].run is RunEffect.STOPS), None)

    @property
    def source(self) -> str:
        return source_file(self.handler)

    @property
    def output(self) -> type[BaseModel]:
        """The model of its result: the metadata of the handler's return annotation,
        `Annotated[CallToolResult, Model]`, which the SDK validates results against; `tools/list` shows its outline
        (`tools/outlines.py`)."""
        (model,) = self.handler.__annotations__["return"].__metadata__  # resolved when declared (`Toolset.tool`)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"tool {self.name} in {self.source}: its result must be annotated "
                            f"Annotated[CallToolResult, Model], Model a pydantic model; got {model!r}")
        return model

    @property
    def description(self) -> str:
        """Its docstring; while no operation stops a run (`RUN_STOPPERS`), the tool that comes closest says so."""
        text = inspect.cleandoc(self.handler.__doc__ or "")
        return f"{text} {CLOSEST_TO_STOP_SAYS}" if self.closest_to_stop and not RUN_STOPPERS else text

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


# What a model reads of the default toolsets' tools (each name, description and input schema, characters of compact
# JSON / 4) at most: every conversation pays it before its first word. Each default toolset owns a share
# (`Toolset.budget`); the shares add up to this.
CONTEXT_BUDGET_TOKENS: Final = 3000


class Toolset:
    """One toolset, declared once at the top of its module: its name (one of `toolsets.TOOLSETS`), the line
    a person reads about it in `--help` and the README, its share of `CONTEXT_BUDGET_TOKENS` when it is offered by
    default (an opt-in toolset costs a conversation nothing unless asked for, and has none), and its tools in the
    order they are declared."""

    def __init__(self, name: str, about: str, *, budget: int | None = None) -> None:
        if name not in TOOLSETS:
            raise ValueError(f"toolset {name!r} is not named in toolsets.py (TOOLSETS)")
        self.name = name
        self.about = about
        self.budget = budget
        if self.default != (budget is not None):
            raise ValueError(f"toolset {name!r} (tools/{name}.py): "
                             + ("a default toolset declares its share of CONTEXT_BUDGET_TOKENS (budget=...)"
                                if self.default else "an opt-in toolset has no share of the budget: drop budget="))
        self.tools: list[ToolSpec] = []

    @property
    def names(self) -> frozenset[str]:
        return frozenset(spec.name for spec in self.tools)

    @property
    def default(self) -> bool:
        """Offered when no toolsets are chosen (`toolsets.OPT_IN_TOOLSETS` lists the others)."""
        return self.name not in OPT_IN_TOOLSETS

    def tool(self, title: str, *operations: str, run_field: str | None = None, viewed: bool = False,
             closest_to_stop: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Declares the decorated handler a tool: its title, the operations it may send, the field of its result
        naming the run it starts or continues (required when one of its operations does), whether the runs view
        draws its result, and whether it comes closest to stopping a run while no operation does."""

        def register(handler: Callable[..., Any]) -> Callable[..., Any]:
            # The annotations resolved once, here: left as text (`from __future__ import annotations`), the SDK
            # evaluated each handler's three times more when the server was built, a fifth of building it.
            handler.__annotations__ = typing.get_type_hints(handler, include_extras=True)
            self.tools.append(ToolSpec(handler.__name__, self.name, title, operations, handler, run_field, viewed,
                                       closest_to_stop))
            return handler

        return register
