"""Successful tool results: the output model as structured content, a one-line summary, and paging."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Self, TypeVar

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from ..api.params import Limit, Skip

# The client's bounds, with descriptions short enough for every paged tool's schema.
PageSkip = Annotated[Skip, Field(description="Offset: next_skip of the previous page.")]
PageLimit = Annotated[Limit, Field(description="Page size.")]
MAX_RESULT_CHARS = 60_000  # a list or trace call returns about this much JSON (~15k tokens) at most


def _with_offset(value: Any) -> Any:
    """The service sends some timestamps without a zone (`2025-06-21 11:20:04.338398`); they are UTC, so they are
    returned in ISO 8601 with the offset said (`2025-06-21T11:20:04.338398+00:00`). Anything unreadable is kept."""
    if not isinstance(value, str):
        return value
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return value
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).isoformat()


Timestamp = Annotated[str | None, BeforeValidator(_with_offset)]


class Output(BaseModel):
    """Base of every tool's output model: what we send back is exactly what the schema says."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def pick(cls, source: Any, **values: Any) -> Self:
        """The fields this model declares, read from an API resource (which may carry many more)."""
        return cls(**{name: getattr(source, name) for name in cls.model_fields if name not in values}, **values)


def ok(output: BaseModel, summary: str) -> CallToolResult:
    """The summary first (what a person or model reads), then the same data as JSON text for clients that
    ignore structured content (the spec asks tools with an output schema to include it)."""
    data = output.model_dump(mode="json", by_alias=True)
    return CallToolResult(
        structured_content=data,
        content=[TextContent(type="text", text=" ".join(summary.split())),
                 TextContent(type="text", text=output.model_dump_json(by_alias=True))],
    )


T = TypeVar("T")


def reported(response: dict[str, Any], keys: tuple[str, ...], kind: type[T]) -> T | None:
    """The first of `keys` that the service's untyped answer holds as a `kind` (a boolean is no count), else None."""
    for key in keys:
        value = response.get(key)
        if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
            return value
    return None


def next_skip(skip: int, returned: int, limit: int, total: int | None) -> int | None:
    """Where the next page starts, or None when this page was the last one."""
    following = skip + returned
    if returned < limit or (total is not None and following >= total):
        return None
    return following


def trim_text(value: str, max_chars: int) -> str:
    """Cut a long string, saying how much was cut, so one field cannot flood a model's context."""
    if len(value) <= max_chars:
        return value
    return f"{value[:max_chars]}…[trimmed {len(value) - max_chars} chars]"
