"""Nothing the service sends is dropped without a reason written down (issue 33): every field of every answer the
reference OpenAPI declares, for every operation a tool sends, is in the tool's result or left out in
`tools/answers.py` with its reason; whatever a tool lets a user write is read back somewhere or said not to be; and
what the service never reports is said in the description of the tool a model reaches for."""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from agent_automation_mcp.api import models
from agent_automation_mcp.api.operations import OPERATIONS
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.server import build_server
from agent_automation_mcp.tools import answers
from agent_automation_mcp.tools.answers import (
    ANSWERS,
    BEYOND_OPENAPI,
    CARRIED,
    NOT_REPORTED,
    SHOWN,
    TARGETS,
    WRITTEN,
    Answer,
    answer_for,
    derived_answer,
)
from agent_automation_mcp.tools.org import Repository
from agent_automation_mcp.tools.registry import TOOLSETS, all_tools
from agent_automation_mcp.tools.results import Output
from agent_automation_mcp.tools.runs import WaitedRun

ROOT = Path(__file__).parents[2]
REGISTRY = Path(inspect.getfile(answers)).relative_to(ROOT)


async def _listed() -> dict[str, dict[str, Any]]:
    async with Client(build_server(ApiSettings(), ServerSettings(toolsets=TOOLSETS))) as client:
        return {tool.name: tool.model_dump(mode="json", by_alias=True, exclude_none=True)
                for tool in (await client.list_tools()).tools}


def answer_fields(document: dict[str, Any], operation_id: str) -> Iterator[str]:
    """The fields of an operation's 200 answer, as paths (`items[].github_pull_requests[].id`), parents first."""
    schemas = document["components"]["schemas"]
    (spec,) = [spec for methods in document["paths"].values() for spec in methods.values()
               if spec["operationId"] == operation_id]
    answer = spec["responses"]["200"].get("content", {}).get("application/json", {}).get("schema", {})

    def walk(schema: dict[str, Any], path: str, seen: frozenset[str]) -> Iterator[str]:
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[-1]
            if name not in seen:
                yield from walk(schemas[name], path, seen | {name})
            return
        for branch in schema.get("anyOf", ()):
            yield from walk(branch, path, seen)
        if schema.get("type") == "array":
            yield from walk(schema.get("items", {}), f"{path}[]", seen)
        for name, child in schema.get("properties", {}).items():
            field = f"{path}.{name}" if path else name
            yield field
            yield from walk(child, field, seen)

    yield from dict.fromkeys(walk(answer, "", frozenset()))


def carries(output_schema: dict[str, Any], path: str) -> bool:
    """Whether a result with this output schema (an outline: names, nested as the result is) holds `path`. A value
    the outline leaves open (`{}`, any JSON) holds everything below it."""
    node: dict[str, Any] = output_schema
    for part in path.split("."):
        name, lists = part.rstrip("[]"), part.count("[]")
        if name:
            if "properties" not in node:
                return "items" not in node  # an open value holds any field; a list of values does not
            if name not in node["properties"]:
                return False
            node = node["properties"][name]
        for _ in range(lists):
            if "items" not in node:
                return "properties" not in node
            node = node["items"]
    return True


def unaccounted(document: dict[str, Any], listed: dict[str, dict[str, Any]]) -> list[str]:
    """Every field an answer carries that its tool's result neither shows nor leaves out with a reason, and every
    entry of `tools/answers.py` that no longer matches the answer or the result: one message each, saying where to
    fix it."""
    problems = []
    for spec in all_tools():
        module = spec.source
        if stray := sorted(set(ANSWERS.get(spec.name, {})) - set(spec.operations)):
            problems.append(f"ANSWERS[{spec.name!r}] in {REGISTRY} names {stray}, which {spec.name} does not send "
                            f"(its toolset.tool(...) in {module} names {sorted(spec.operations)}): remove them")
            continue
        schema = listed[spec.name]["outputSchema"]
        for operation in spec.operations:
            answer = answer_for(spec.name, operation)
            if answer.read_for is not None:
                continue
            operation_id = OPERATIONS[operation].operation_id
            fields = [*answer_fields(document, operation_id), *BEYOND_OPENAPI.get(operation, ())]
            if answer.whole is not None and not carries(schema, answer.whole):
                problems.append(f"{spec.name}'s result has no `{answer.whole}` for the whole answer of {operation}")
            declared = ANSWERS.get(spec.name, {}).get(operation, SHOWN)  # what the rules add may not apply
            stale = sorted({*(set(declared.left_out) - set(fields)),
                            *(prefix for prefix in declared.renamed
                              if not any(f == prefix or f.startswith((f"{prefix}.", f"{prefix}[]")) for f in fields))})
            if stale:
                problems.append(f"ANSWERS[{spec.name!r}][{operation!r}] in {REGISTRY} names {stale}, which "
                                f"{operation} ({operation_id}) does not answer: remove them")
            for field in fields:
                target = answer.result_path(field)
                if field in answer.left_out:
                    if carries(schema, target):
                        problems.append(f"{spec.name}'s result carries `{target}`, yet ANSWERS in {REGISTRY} says "
                                        f"{operation}'s `{field}` is left out: remove it from left_out")
                    continue
                if field.startswith("[]") and answer.listed is None and "[]" not in answer.renamed:
                    problems.append(
                        f"operation {operation} ({operation_id}) answers a list, and {spec.name}'s result has no one "
                        f"list field to carry its items: give its output model ({module}) one list field (a result "
                        f"with exactly one carries a list answer's items), or map `[]` where the result has them in "
                        f"ANSWERS[{spec.name!r}][{operation!r}].renamed in {REGISTRY}")
                    break
                if not carries(schema, target):
                    problems.append(
                        f"field `{field}` of operation {operation} ({operation_id}) is neither in {spec.name}'s "
                        f"result (no `{target}` in its output schema) nor left out with a reason: show it in the "
                        f"tool's output model ({module}), map it where the result has it in "
                        f"ANSWERS[{spec.name!r}][{operation!r}].renamed, or add it with why it is left out to "
                        f"ANSWERS[{spec.name!r}][{operation!r}].left_out in {REGISTRY} (or to CARRIED there, for "
                        "every tool whose result holds the same model; docs/tools.md is generated from them: "
                        "UPDATE_DOCS=1 .venv/bin/pytest tests/test_docs.py)")
    return problems


@pytest.mark.anyio
async def test_every_field_the_service_answers_is_shown_or_left_out_with_its_reason(
        openapi_document: dict[str, Any]) -> None:
    problems = unaccounted(openapi_document, await _listed())
    assert not problems, "\n".join(problems)
    answers = [*(answer for declared in ANSWERS.values() for answer in declared.values()), *CARRIED.values()]
    reasons = [reason for answer in answers
               for reason in (*answer.left_out.values(), *([answer.read_for] if answer.read_for else []))]
    assert reasons and all(len(reason) > 20 for reason in reasons)


@pytest.mark.anyio
async def test_what_carried_says_of_a_model_applies_to_a_tool_returning_it(openapi_document: dict[str, Any]) -> None:
    """Each field CARRIED names is a field of an answer shown by some tool whose result holds the model, so a name
    written wrong there cannot pass for a rule."""
    unused = {(model.__name__, name) for model, carried in CARRIED.items() for name in [*carried.renamed,
                                                                                      *carried.left_out]}
    for spec in all_tools():
        for operation in spec.operations:
            fields = set(answer_fields(openapi_document, OPERATIONS[operation].operation_id))
            answer = answer_for(spec.name, operation)
            applied = {path for path in [*answer.renamed, *answer.left_out] if path in fields}
            unused -= {(model, name) for model, name in unused
                       if any(path == name or path.endswith(f".{name}") for path in applied)}
    assert not unused, (f"CARRIED in {REGISTRY} names fields that no answer shown by a tool returning the model has: "
                        f"{sorted(unused)}: correct or remove them")


@pytest.mark.anyio
async def test_a_field_the_service_adds_fails_naming_the_field_the_operation_and_where_to_fix_it(
        openapi_document: dict[str, Any]) -> None:
    """The next field the service adds cannot be dropped silently: each tool whose result shows an answer that grows
    fails once, naming the field, the operation, the tool's module and this registry."""
    grown = copy.deepcopy(openapi_document)
    grown["components"]["schemas"]["AgentRunResponse"]["properties"]["parent_run_id"] = {"type": "integer"}
    grown["components"]["schemas"]["RepoResponse"]["properties"]["default_branch"] = {"type": "string"}
    listed = await _listed()
    before = set(unaccounted(openapi_document, listed))
    problems = [problem for problem in unaccounted(grown, listed) if problem not in before]
    expected = [(spec, operation, field) for spec in all_tools() for operation in spec.operations
                if answer_for(spec.name, operation).read_for is None
                and answer_for(spec.name, operation).whole is None
                for operation_id in [OPERATIONS[operation].operation_id]
                for field in answer_fields(grown, operation_id)
                if field not in set(answer_fields(openapi_document, operation_id))]
    assert {(spec.name, field) for spec, _, field in expected} >= {
        ("create_agent_run", "parent_run_id"), ("get_agent_run", "parent_run_id"),
        ("resume_agent_run", "parent_run_id"), ("list_agent_runs", "items[].parent_run_id"),
        ("list_repositories", "items[].default_branch")}
    for spec, operation, field in expected:
        said = [p for p in problems if p.startswith(f"field `{field}` of operation {operation} ")
                and f" in {spec.name}'s result " in p]
        assert len(said) == 1, (spec.name, operation, field, problems)
        assert spec.source in said[0] and str(REGISTRY) in said[0]
    assert len(problems) == len(expected), problems
    (repos,) = [p for p in problems if "default_branch" in p and "list_repositories's result" in p]
    assert "no `repositories[].default_branch` in its output schema" in repos


@pytest.mark.anyio
async def test_whatever_a_tool_lets_a_user_write_is_read_back_or_said_not_to_be() -> None:
    listed = await _listed()
    names = {spec.name for spec in all_tools()}
    for spec in all_tools():
        if spec.read_only:
            continue
        arguments = set(listed[spec.name]["inputSchema"].get("properties", {}))
        written = set(WRITTEN.get(spec.name, {}))
        unplaced, stray = sorted(arguments - TARGETS - written), sorted(written - arguments)
        assert not unplaced, (f"{spec.name} lets a user write {unplaced}: say where each is read back (or that the "
                              f"service does not return it) in WRITTEN[{spec.name!r}] in {REGISTRY}; an argument "
                              "that names what the tool acts on goes in TARGETS there instead")
        assert not stray, f"WRITTEN[{spec.name!r}] in {REGISTRY} names {stray}, which {spec.name} does not take"
        for argument, where in WRITTEN.get(spec.name, {}).items():
            readers = set(re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", where)) & names
            assert readers or re.search(r"\b(not|never) (returned|stored)\b", where), (
                f"WRITTEN[{spec.name!r}][{argument!r}] in {REGISTRY} names no tool that reads it back and does not "
                f"say it is not returned: {where!r}")


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.anyio
async def test_what_the_service_never_reports_is_said_once_where_a_model_looks() -> None:
    listed = await _listed()

    def says(name: str, words: str) -> bool:
        tool = listed[name]
        described = [tool["description"], *(prop.get("description", "") for prop in
                                             tool["inputSchema"].get("properties", {}).values())]
        return any(_words(words) in _words(text) for text in described)

    for gap in NOT_REPORTED:
        saying = [name for name in listed if says(name, gap.said)]
        assert saying == [gap.tool], (f"NOT_REPORTED in {REGISTRY} says {gap.tool}'s description says {gap.said!r}; "
                                      f"the tools whose description says it: {saying}: say it in {gap.tool}'s "
                                      "docstring (or an argument's description) and nowhere else")
    assert {"a run", "a pull request", "a repository"} <= {gap.about for gap in NOT_REPORTED}


class _Providers(Output):
    providers: list[models.OAuthProvider]


class _Two(Output):
    first: list[int]
    second: list[int] | None = None


class _Holder(Output):
    repository: Repository | None = None
    runs: list[WaitedRun]


def test_the_rules_spare_a_new_tool_an_entry_the_guide_says_it_needs_not() -> None:
    """A result with one list field carries a bare-list answer's items there; a result holding a model of CARRIED (or
    a subclass of one, in a list, or under a field the entry renames) gets what CARRIED says of it, at that place."""
    listed = derived_answer(_Providers, SHOWN)
    assert listed.result_path("[].issuer") == "providers[].issuer"
    assert listed.answer_paths("providers[]") == {"[]", "providers[]"}  # a bare list, or a field of that name
    assert derived_answer(_Two, SHOWN).result_path("[].x") == "[].x"  # two lists: the entry must say which
    held = derived_answer(_Holder, SHOWN)
    assert held.left_out == {"repository.name": CARRIED[Repository].left_out["name"]}
    assert held.result_path("runs[].github_pull_requests[].id") == "runs[].pull_requests[].pr_id"
    paged = derived_answer(_Holder, Answer(renamed={"items": "runs"}, left_out={"page": "a reason long enough"}))
    assert paged.result_path("items[].github_pull_requests[].url") == "runs[].pull_requests[].url"
    assert paged.left_out["page"] == "a reason long enough" and "repository.name" in paged.left_out
    whole = Answer(whole="response")
    assert derived_answer(_Holder, whole) is whole
