"""Successful tool results: the output model as structured content, a one-line summary, paging, and bounds.

What the service sent is data, not prose: summaries name what and where (ids, counts, our own words),
never the service's or a third party's text, which travels in structured content only, made visible
(`api.text.visible`) and bounded (`MAX_RESULT_CHARS`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Annotated, Any, Final, Self, TypeVar

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from ..api.params import Limit, Skip
from ..api.text import hides_nothing, visible_tree

MAX_RESULT_CHARS: Final = 60_000  # of a result's JSON (~15k tokens), so one call cannot flood a model's context
PAGE_ITEMS_CHARS: Final = MAX_RESULT_CHARS - 2_000  # a page's items, leaving room for its other fields
MAX_STRING_CHARS: Final = 5_000  # a single string, when a result must be cut to fit
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,59}")
ItemT = TypeVar("ItemT", bound=BaseModel)
T = TypeVar("T")

# The client's bounds, with descriptions short enough for every paged tool's schema.
PageSkip = Annotated[Skip, Field(description="Offset: next_skip of the previous page.")]
PageLimit = Annotated[Limit, Field(description="Page size.")]


def instant(value: Any) -> datetime | None:
    """A timestamp the service sent, zone-aware: some come without a zone (`2025-06-21 11:20:04.338398`), and those
    are UTC. None when it is not one."""
    return _parsed(value) if isinstance(value, str) else None


def _with_offset(value: Any) -> Any:
    """Timestamps in ISO 8601 with the offset said (`2025-06-21T11:20:04.338398+00:00`); anything unreadable kept."""
    return _utc_iso(value) if isinstance(value, str) else value


@lru_cache(maxsize=4096)  # a result's timestamps are read two or three times: our models, then the SDK's check
def _parsed(value: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@lru_cache(maxsize=4096)
def _utc_iso(value: str) -> str:
    moment = _parsed(value)
    return value if moment is None else moment.isoformat()


Timestamp = Annotated[str | None, BeforeValidator(_with_offset)]


class Output(BaseModel):
    """Base of every tool's output model: what we send back is exactly what the schema says."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    @classmethod
    def pick(cls, source: Any, **values: Any) -> Self:
        """The fields this model declares, read from an API resource (which may carry many more)."""
        return cls(**{name: getattr(source, name) for name in cls.model_fields if name not in values}, **values)


def ok(output: BaseModel, summary: str, *, rest: str = "ask for less at once",
       render: Callable[[Any], str] | None = None) -> CallToolResult:
    """The summary first (what a person or model reads), then the same data as text: JSON, or what `render` makes
    of it in fewer tokens with every field kept. Many hosts show a model only the text, and the spec asks tools
    with an output schema to include it for clients that ignore structured content.

    Longer than `MAX_RESULT_CHARS`, the data is cut to fit (long strings first, then the end of the largest
    list) and the summary says so and how to get the rest (`rest`).
    """
    data = output.model_dump(mode="json", by_alias=True)
    text = compact_json(data)
    if not hides_nothing(text):
        data = visible_tree(data)
        text = compact_json(data)
    if len(text) > MAX_RESULT_CHARS:
        data, what = _fit(data)
        text = compact_json(data)
        summary = f"{summary} [cut to fit {MAX_RESULT_CHARS:,} characters: {what}; for the rest, {rest}]"
    if render is not None:
        text = render(data)
    return CallToolResult(structured_content=data, content=[TextContent(type="text", text=" ".join(summary.split())),
                                                            TextContent(type="text", text=text)])


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`1 run`, `0 runs`, `2 entries`: a count with its noun in the number it takes."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def label(value: object, unknown: str = "unknown") -> str:
    """A short identifier the service sent (a status, a model or provider name), or `unknown` when it is not one:
    the only kind of service text a summary repeats."""
    return value if isinstance(value, str) and _WORD.fullmatch(value) else unknown


def fit_page(items: Sequence[ItemT], skip: int, limit: int, total: int | None) -> tuple[list[ItemT], int | None]:
    """The items of a page, from the first, that fit the result budget (at least one), and where the next page
    starts: after the last item kept, so nothing is skipped when the budget cut the page short."""
    kept: list[ItemT] = []
    size = 0
    for item in items:
        size += len(item.model_dump_json(by_alias=True)) + 1
        if kept and size > PAGE_ITEMS_CHARS:
            return kept, skip + len(kept)
        kept.append(item)
    return kept, next_skip(skip, len(kept), limit, total)


def compact_json(data: Any) -> str:
    """JSON in its fewest characters, as results carry it."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _fit(data: Any) -> tuple[Any, str]:
    """Cut long strings, then items from the end of the largest list, until the JSON fits; say what was cut."""
    cut: list[str] = []
    strings = 0

    def shorten(value: Any) -> Any:
        nonlocal strings
        if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
            strings += 1
            return trim_text(value, MAX_STRING_CHARS)
        if isinstance(value, dict):
            return {key: shorten(item) for key, item in value.items()}
        if isinstance(value, list):
            return [shorten(item) for item in value]
        return value

    data = shorten(data)
    if strings:
        cut.append(f"{counted(strings, 'long text value')} shortened")
    for _ in range(20):  # each round halves the excess of one list, so few rounds are ever needed
        excess = len(compact_json(data)) - MAX_RESULT_CHARS
        if excess <= 0:
            break
        found = _largest_list(data, ())
        if found is None:
            break
        path, items = found
        keep = len(items)
        while keep > 0 and sum(len(compact_json(item)) + 1 for item in items[keep:]) < excess:
            keep -= 1
        data = _replace(data, path, items[:keep])
        where = ".".join(map(str, path)) or "the result"
        cut.append(f"{len(items) - keep} of {counted(len(items), 'item')} of {where} left out")
    return data, "; ".join(cut)


def _largest_list(value: Any, path: tuple[Any, ...]) -> tuple[tuple[Any, ...], list[Any]] | None:
    candidates: list[tuple[int, tuple[Any, ...], list[Any]]] = []

    def walk(node: Any, where: tuple[Any, ...]) -> None:
        if isinstance(node, list) and node:
            candidates.append((len(compact_json(node)), where, node))
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in children:
            walk(child, (*where, key))

    walk(value, path)
    if not candidates:
        return None
    _, where, items = max(candidates, key=lambda candidate: candidate[0])
    return where, items


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, *tail = path
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], tuple(tail), new)}
    return [_replace(item, tuple(tail), new) if index == head else item for index, item in enumerate(value)]


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
    return f"{value[:max_chars]}…[trimmed {counted(len(value) - max_chars, 'char')}]"


EXTRA_FIELDS_CHARS: Final = 2_000  # of what one resource sent beyond its model's fields, as JSON
EXTRA_VALUE_CHARS: Final = 300  # of each such value (as its JSON when it is not a string)


def extra_fields(resource: BaseModel, taken: frozenset[str] = frozenset()) -> dict[str, Any] | None:
    """What the service sent on `resource` beyond the fields its model names (and those a result shows under names
    of its own, `taken`), bounded: each value past EXTRA_VALUE_CHARS cut, and past EXTRA_FIELDS_CHARS the last fields
    left out with their count said (`…`). Untrusted text like every service string (`ok` makes it visible). None
    when the service sent nothing more."""
    sent = {key: value for key, value in (resource.model_extra or {}).items() if key not in taken}
    if not sent:
        return None
    kept: dict[str, Any] = {}
    size = 2
    for key, value in sent.items():
        text = value if isinstance(value, str) else compact_json(value)
        short = value if len(text) <= EXTRA_VALUE_CHARS else trim_text(text, EXTRA_VALUE_CHARS)
        size += len(compact_json({key[:EXTRA_VALUE_CHARS]: short}))
        if size > EXTRA_FIELDS_CHARS:
            kept["…"] = f"{counted(len(sent) - len(kept), 'more field')} left out"
            break
        kept[key[:EXTRA_VALUE_CHARS]] = short
    return kept
