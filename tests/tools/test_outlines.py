"""The output outline read off a result model's fields (`tools.outlines`) is the outline of the JSON schema the SDK
would have generated for it, for every tool: the faster way may never say anything else."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from pydantic import BaseModel, Field

from agent_automation_mcp.tools.outlines import model_outline
from agent_automation_mcp.tools.registry import all_tools


def outline(schema: Any) -> Any:
    """The outline of a JSON schema: each object's property names, a list's item's, the first branch of `anyOf` that
    has any, nothing for a value that holds no named fields; a definition met again inside itself holds none."""
    defs = schema.get("$defs", {})

    def names(node: Any, seen: frozenset[str]) -> dict[str, Any]:
        if not isinstance(node, dict):
            return {}
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            return {} if name in seen else names(defs.get(name), seen | {name})
        for branch in node.get("anyOf", ()):
            if inner := names(branch, seen):
                return inner
        if isinstance(node.get("properties"), dict):
            return {"properties": {key: names(value, seen) for key, value in node["properties"].items()}}
        inner = names(node.get("items"), seen)
        return {"items": inner} if inner else {}

    return {"type": "object", **names(schema, frozenset())}


def generated(model: type[BaseModel]) -> dict[str, Any]:
    """The output schema the SDK derives for a tool returning `Annotated[CallToolResult, model]`."""
    schema = FuncMetadata(arg_model=ArgModelBase, output_model=model).output_schema
    assert schema is not None
    return schema


@pytest.mark.parametrize("spec", all_tools(), ids=lambda spec: spec.name)
def test_every_tools_outline_is_that_of_its_generated_schema(spec: Any) -> None:
    assert model_outline(spec.output) == outline(generated(spec.output))


class Leaf(BaseModel):
    a: int
    b: str | None = None


class Node(BaseModel):
    label: str
    children: list[Node] = []
    parent: Node | None = None
    leaf: Annotated[Leaf | None, Field(description="d")] = None
    either: int | Leaf | None = None
    leaves: tuple[Leaf, ...] = ()
    pair: tuple[Leaf, Leaf] | None = None
    by_key: dict[str, Leaf] = {}
    sets: list[list[Leaf]] = []
    sequence: Sequence[Leaf] = ()
    renamed: int = Field(0, alias="spoken")
    anything: Any = None


def test_every_shape_outlines_as_its_json_schema_does() -> None:
    """Nesting, a model inside itself, unions, tuples, mappings, lists of lists, sequences and aliases: each named
    as pydantic's schema names it."""
    found = model_outline(Node)
    assert found == outline(generated(Node))
    assert found["properties"]["leaf"] == found["properties"]["either"] == {"properties": {"a": {}, "b": {}}}
    assert found["properties"]["children"] == {"items": {"properties": {
        "label": {}, "children": {}, "parent": {}, "leaf": {"properties": {"a": {}, "b": {}}},
        "either": {"properties": {"a": {}, "b": {}}}, "leaves": {"items": {"properties": {"a": {}, "b": {}}}},
        "pair": {}, "by_key": {}, "sets": {"items": {"items": {"properties": {"a": {}, "b": {}}}}},
        "sequence": {"items": {"properties": {"a": {}, "b": {}}}}, "spoken": {}, "anything": {}}}}
    assert found["properties"]["pair"] == found["properties"]["by_key"] == {}
