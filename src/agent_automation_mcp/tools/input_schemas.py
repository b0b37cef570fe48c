"""A tool's input schema as `tools/list` publishes it: the same schema in fewer characters, since every conversation
reads it (what a model reads of the default tools has a budget: tests/tools/test_registry.py). Output schemas are
outlines (`outlines.py`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final


def compact_schema(schema: Any) -> Any:
    """The same input schema in fewer characters.

    Drops the `title` keywords pydantic adds (they restate property names; a property *named* title is
    kept), `default: null` and `additionalProperties: true` (what JSON Schema assumes anyway), writes
    `anyOf: [{type: X}, {type: null}]` as `type: [X, "null"]`, and puts a definition used once where it is
    used. An optional argument is listed without `null`: leaving it out says "none" (a null sent is still
    taken). Bounds only a mistake meets (`MISTAKES_ONLY`) are left to the server, which still refuses a value
    past them, naming the bound: what a model reads of them would never change what it sends.
    """
    return _optional_without_null(_compact(_inlined(schema)))


# Bounds no value a model means ever meets: ids and sizes start at 1 and offsets at 0, a text is never empty or only
# spaces, and nobody skips a million entries or writes a hundred thousand characters by accident.
MISTAKES_ONLY: Final[Mapping[str, Callable[[Any], bool]]] = {
    "minimum": lambda bound: bound in (0, 1),
    "minLength": lambda bound: bound == 1,
    "pattern": lambda bound: bound == r"\S",
    "maximum": lambda bound: isinstance(bound, int) and bound >= 1_000_000,
    "maxLength": lambda bound: isinstance(bound, int) and bound >= 100_000,
}


def _optional_without_null(schema: Any) -> Any:
    """The top-level arguments that may be left out, typed without their `null`."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return schema
    required = set(schema.get("required", ()))
    out = {}
    for name, sub in properties.items():
        kinds = sub.get("type") if isinstance(sub, dict) else None
        if name not in required and isinstance(kinds, list) and len(kinds) == 2 and "null" in kinds:
            sub = {**sub, "type": next(kind for kind in kinds if kind != "null")}
            if isinstance(sub.get("enum"), list):
                sub["enum"] = [value for value in sub["enum"] if value is not None]
        out[name] = sub
    return {**schema, "properties": out}


def _compact(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_compact(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if (key == "title" and isinstance(value, str)) or (key == "default" and value is None) \
                or (key == "additionalProperties" and value is True) \
                or (key in MISTAKES_ONLY and not isinstance(value, bool) and MISTAKES_ONLY[key](value)):
            continue
        if key in ("properties", "$defs", "patternProperties") and isinstance(value, dict):
            out[key] = {name: _compact(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not", "anyOf", "oneOf", "allOf", "prefixItems"):
            out[key] = _compact(value)
        else:
            out[key] = value
    return _nullable(out)


def _inlined(schema: Any) -> Any:
    """`{"$ref": "#/$defs/X"}` replaced by X where X is used once (and is not inside itself)."""
    if not isinstance(schema, dict) or not isinstance(schema.get("$defs"), dict):
        return schema
    defs: dict[str, Any] = schema["$defs"]
    text = json.dumps(schema)
    once = {name for name in defs if text.count(f'"#/$defs/{name}"') == 1}

    def replace(node: Any, inside: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [replace(item, inside) for item in node]
        if not isinstance(node, dict):
            return node
        name = node.get("$ref", "").removeprefix("#/$defs/") if isinstance(node.get("$ref"), str) else None
        if name in once and name not in inside:
            rest = {key: value for key, value in node.items() if key != "$ref"}
            return {**replace(defs[name], inside | {name}), **rest}
        return {key: replace(value, inside) for key, value in node.items()}

    out = replace({key: value for key, value in schema.items() if key != "$defs"}, frozenset())
    kept = {name: replace(value, frozenset({name})) for name, value in defs.items()}
    text = json.dumps(out) + json.dumps(kept)
    left = {name: value for name, value in kept.items() if f'"#/$defs/{name}"' in text}
    return {**out, "$defs": left} if left else out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    branches = schema.get("anyOf")
    if not isinstance(branches, list) or len(branches) != 2 or {"type": "null"} not in branches:
        return schema
    (other,) = [b for b in branches if b != {"type": "null"}]
    if not isinstance(other.get("type"), str) or "$ref" in other:
        return schema
    merged: dict[str, Any] = other | {k: v for k, v in schema.items() if k != "anyOf"}  # the outer description wins
    merged["type"] = [other["type"], "null"]
    if "enum" in merged:
        merged["enum"] = [*merged["enum"], None]
    return merged
