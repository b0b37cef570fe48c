"""A tool's output schema as `tools/list` publishes it: an outline, the names of what a result holds, nested as the
result holds them, without types.

Before a call a model needs to know what a result will hold (pull_requests[].pr_id, next_skip); that a field is an
integer or may be null it reads off the value. The types, `required` lists and nullable branches were a third of
`tools/list` and told a model nothing, so they go; `{}` (any value) keeps the schema valid for every result.

The outline is read straight off the models' fields: generating each result model's whole JSON schema (what the
SDK does unless given one) only to keep its names was a third of building the server at every start.
`tests/tools/test_outlines.py` holds it, for every tool, to the outline of pydantic's own JSON schema of the model.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence, Set
from typing import Annotated, Any, Union

from pydantic import BaseModel
from pydantic.fields import FieldInfo

Node = dict[str, Any]
SEQUENCES = (list, set, frozenset, Sequence, Set)  # origins of a JSON array of one kind of item


def model_outline(model: type[BaseModel]) -> Node:
    """The outline of the object `model` validates: `{"type": "object", "properties": {name: outline, ...}}`."""
    return {"type": "object", **_model(model, frozenset())}


def _model(model: type[BaseModel], seen: frozenset[type[BaseModel]]) -> Node:
    return {"properties": {_name(name, field): _annotation(field.annotation, seen)
                           for name, field in model.model_fields.items()}}


def _name(name: str, field: FieldInfo) -> str:
    """The key a result holds the field under (the JSON schema names what is validated: the validation alias)."""
    if isinstance(field.validation_alias, str):
        return field.validation_alias
    return field.alias or name


def _annotation(annotation: Any, seen: frozenset[type[BaseModel]]) -> Node:
    """A model's names, a sequence's item's, the first branch of a union that has any (`X | None`: X's); nothing for
    a scalar, a mapping or a tuple of fixed length. A model met again inside itself has none (it would never end);
    the result's own model is met once more below the top, as in the JSON schema, whose top is a copy of it."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _annotation(typing.get_args(annotation)[0], seen)
    if origin in (Union, types.UnionType):
        for branch in typing.get_args(annotation):
            if inner := _annotation(branch, seen):
                return inner
        return {}
    if origin in SEQUENCES or (origin is tuple and typing.get_args(annotation)[1:] == (...,)):
        inner = _annotation(typing.get_args(annotation)[0], seen)
        return {"items": inner} if inner else {}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {} if annotation in seen else _model(annotation, seen | {annotation})
    return {}
