"""Fuzzing every tool's arguments through a real MCP client: the strategy, and what every answer must be.

Shared by `test_fuzz.py` (a modest, derandomised run in the suite) and `benchmarks/fuzz.py` (≥ 10,000 calls).
Arguments are drawn from each tool's advertised input schema, near and beyond its bounds, mixed with any
JSON at all (huge numbers, digit strings with spaces or underscores, hidden controls, nesting) and
misspelt names, so both what a careless model and what an attacker would send are covered.
"""

from __future__ import annotations

import string
from typing import Any, Final

from hypothesis import strategies as st
from mcp.types import CallToolResult

ERROR_KEYS: Final = frozenset({"kind", "status", "message", "retry_after_seconds", "details", "hint"})
TRICKY_INTS: Final = (0, -1, 1, 42, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 10**30, -(2**63))
SANDBOX_IDS: Final = (1, 201, 301, 401, 409, 601)  # ids the sandbox's world has, so calls also reach it
TRICKY_TEXT: Final = ("", " ", "42", " 42 ", "4_2", "0x2a", "1e3", "٤٢", "42\n", "\u202e42", "null", "true",
                      "https://example.com/hook", "http://127.0.0.1/x", "javascript:alert(1)", "ERROR", "x" * 300)
# Waiting is bounded by the schema (50 s); the fuzz stays fast by rarely asking for more than a second.
OVERRIDES: Final = {"wait_seconds": st.sampled_from([0, 1, -1, 51, "1", True, None, 1.5])}

_TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40)
ANY_JSON: Final = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(TRICKY_INTS)
    | st.floats(allow_nan=False, allow_infinity=False) | _TEXT | st.sampled_from(TRICKY_TEXT),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_TEXT, children, max_size=4),
    max_leaves=12)


def near_bounds(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of the schema's own type, at, inside and just past its bounds."""
    kinds = schema.get("type") if isinstance(schema.get("type"), list) else [schema.get("type")]
    options: list[st.SearchStrategy[Any]] = []
    if "enum" in schema:
        options.append(st.sampled_from(schema["enum"]))
        options.append(st.sampled_from([str(v).lower() for v in schema["enum"] if v is not None] or [""]))
    if "integer" in kinds:
        low, high = schema.get("minimum", -5), schema.get("maximum", 10_000)
        options += [st.integers(low - 2, high + 2), st.integers(low, high).map(str), st.sampled_from(TRICKY_INTS),
                    st.sampled_from(SANDBOX_IDS), st.sampled_from(SANDBOX_IDS)]
    if "string" in kinds and "enum" not in schema:
        longest = schema.get("maxLength", 100)
        options += [_TEXT, st.sampled_from(TRICKY_TEXT), st.just("x" * longest), st.just("y" * (longest + 1))]
        if schema.get("pattern", "").startswith("^https?"):
            options.append(st.from_regex(r"https://[a-z]{1,10}\.example/[a-z0-9/]{0,20}", fullmatch=True))
        else:
            options.append(st.text(alphabet=string.ascii_letters + string.digits + "_-.", min_size=1, max_size=20))
    if "boolean" in kinds:
        options += [st.booleans(), st.sampled_from(["true", 1, 0])]
    if "array" in kinds:
        item = near_bounds(schema.get("items", {}))
        options += [st.lists(item, max_size=5), st.lists(item, min_size=schema.get("maxItems", 5) + 1,
                                                         max_size=schema.get("maxItems", 5) + 1)]
    if "object" in kinds:
        values = near_bounds(schema["additionalProperties"]) if isinstance(schema.get("additionalProperties"),
                                                                           dict) else ANY_JSON
        options.append(st.dictionaries(_TEXT, values, max_size=4))
    if "null" in kinds or not options:
        options.append(st.none())
    return st.one_of(options)


def within_bounds(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values the schema accepts, so that calls also get past validation and reach the service."""
    kinds = schema.get("type") if isinstance(schema.get("type"), list) else [schema.get("type")]
    if "enum" in schema:
        return st.sampled_from([value for value in schema["enum"] if value is not None])
    if "integer" in kinds:
        low, high = schema.get("minimum", 0), schema.get("maximum", 1000)
        return st.sampled_from([i for i in SANDBOX_IDS if low <= i <= high] or [low]) | st.integers(low, high)
    if "string" in kinds:
        if schema.get("pattern", "").startswith("^https?"):
            return st.from_regex(r"https://[a-z]{1,10}\.example/[a-z0-9/]{0,20}", fullmatch=True)
        return st.text(alphabet=string.ascii_letters + string.digits + "_-. ", min_size=1,
                       max_size=min(schema.get("maxLength", 40), 40)).filter(str.strip)
    if "boolean" in kinds:
        return st.booleans()
    if "array" in kinds:
        return st.lists(within_bounds(schema.get("items", {})), max_size=min(schema.get("maxItems", 3), 3))
    if "object" in kinds and isinstance(schema.get("additionalProperties"), dict):
        return st.dictionaries(st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=10),
                               within_bounds(schema["additionalProperties"]), max_size=3)
    return st.none()


def arguments(input_schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Any subset of the tool's arguments (required ones too may be missing), sometimes with a misspelt one."""
    properties: dict[str, Any] = input_schema.get("properties", {})
    fields = {name: OVERRIDES[name] if name in OVERRIDES else
              st.one_of(near_bounds(schema), near_bounds(schema), ANY_JSON) for name, schema in properties.items()}
    required = {name: fields[name] for name in input_schema.get("required", [])}
    optional = {name: value for name, value in fields.items() if name not in required}
    valid_shape = st.fixed_dictionaries(required, optional=optional)
    sound = st.fixed_dictionaries({name: within_bounds(properties[name]) for name in required},
                                  optional={name: within_bounds(properties[name]) for name in optional})
    anything = st.fixed_dictionaries({}, optional=fields)
    misspelt = st.builds(lambda args, key, value: {**args, key: value}, anything,
                         st.sampled_from([f"{name}s" for name in properties] or ["id"]), ANY_JSON)
    return st.one_of(sound, sound, valid_shape, valid_shape, anything, misspelt)


def problem(result: CallToolResult) -> str | None:
    """None when the answer is a result or an error in the one shape; otherwise what is wrong with it."""
    if not result.is_error:
        return None if isinstance(result.structured_content, dict) else "a success without structured content"
    error = (result.structured_content or {}).get("error")
    if not isinstance(error, dict) or not {"kind", "status", "message", "hint"} <= set(error) <= ERROR_KEYS:
        return f"an error not in the one shape: {result.structured_content!r:.200}"
    if error["kind"] == "internal_error":
        return f"a crash inside the server: {error['message']}"
    if len(result.content) != 1 or "\n" in result.content[0].text:
        return "an error whose text is not one line"
    return None
