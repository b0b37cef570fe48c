"""What a tool declares (`toolset.tool(...)`) is what the server does with it: a tool that starts a run names the
run in its result and is offered as a task, and a tool whose result the runs view draws is bound to the view. Each
failure names the missing declaration and the file that holds it."""

from __future__ import annotations

import inspect
import re
from typing import Annotated, Any, Final

import pytest
from mcp import Client
from mcp.types import CallToolResult
from pydantic import BaseModel

from agent_automation_mcp.api import models
from agent_automation_mcp.api.client import AgentAutomationClient
from agent_automation_mcp.api.operations import RunEffect
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.server import build_server
from agent_automation_mcp.tasks.extension import RUN_ID_FIELDS, STOPPING_TOOLS
from agent_automation_mcp.tools.declarations import Toolset, source_file
from agent_automation_mcp.tools.registry import TOOLSETS, all_tools
from agent_automation_mcp.tools.results import Output
from agent_automation_mcp.view import page

# What `showResult` in view/runs.html draws, told by a result's top-level fields: a trace's digest, a trace page, runs
# counted, a list of runs, one run. `test_the_shapes_are_the_pages_own` ties this to the page's code.
# Each shape: the fields it is told by, and the JSON type each must have (None: present, of any type).
DRAWN: Final[dict[str, dict[str, str | None]]] = {
    "a digest": {"digest": "object"}, "a trace page": {"entries": "array"}, "runs counted": {"counts": "object"},
    "a list of runs": {"runs": "array"},
    "a run": {"id": "integer", "is_terminal": None}}


def test_a_tool_that_starts_a_run_names_the_run_in_its_result() -> None:
    starting = [spec for spec in all_tools() if spec.run_effect.sets_going]
    assert {spec.name for spec in starting} >= {"create_agent_run", "resume_agent_run"}
    for spec in starting:
        fields = spec.output.model_fields
        assert spec.run_field in fields and fields[spec.run_field].annotation in (int, "int"), (
            f"{spec.name} declares run_field={spec.run_field!r}, which is not an integer field of its result "
            f"({sorted(fields)}): name the field holding the run's id in toolset.tool(...) in {spec.source}")
    assert {spec.name: spec.run_field for spec in starting} == RUN_ID_FIELDS


def test_what_a_tool_does_to_a_run_is_what_its_operations_say() -> None:
    """`run_field` is required of a tool whose operations start or continue a run, refused of any other (a stop
    included), and one tool does one thing to a run; each refusal names the table's line and the tool's file."""
    toolset = Toolset("webhooks", "scratch")  # opt-in: no share of the budget to declare
    with pytest.raises(ValueError, match=r"sends create_agent_run, which starts an agent run \(run=RunEffect.STARTS "
                                         r"on its line in src/agent_automation_mcp/api/operations.py\): declare the "
                                         r"field .* run_field=\"id\""):
        toolset.tool("Start", "create_agent_run")(_a_handler)
    with pytest.raises(ValueError, match=r"declares run_field, but none of its operations starts or continues an "
                                         r"agent run \(their run= in src/agent_automation_mcp/api/operations.py: "
                                         r"RunEffect.NOTHING\)"):
        toolset.tool("Read", "get_agent_run", run_field="id")(_a_handler)
    with pytest.raises(ValueError, match="sends operations that do different things to an agent run"):
        toolset.tool("Both", "create_agent_run", "resume_agent_run", run_field="id")(_a_handler)
    assert not toolset.tools
    effects = {spec.name: spec.run_effect for spec in all_tools()}
    assert effects["resume_agent_run"] is RunEffect.CONTINUES and effects["create_agent_run"] is RunEffect.STARTS
    assert effects["ban_checks"] is RunEffect.NOTHING  # it bans a pull request's checks: no stop a cancel may send


def _takes_the_run_id_alone(operation: str) -> bool:
    """The client's method for `operation` takes the run's id first, as `agent_run_id`, and needs nothing else."""
    method = getattr(AgentAutomationClient, operation, None)
    parameters = list(inspect.signature(method).parameters.values())[1:] if method is not None else []
    return bool(parameters) and parameters[0].name == "agent_run_id" and all(
        parameter.default is not inspect.Parameter.empty for parameter in parameters[1:])


def test_a_stop_is_sent_by_the_run_id_alone() -> None:
    """A task's cancel sends a stopping tool's operation through the client's method of its name, with the run's id
    alone (`RunTasks._stop`): every operation that stops a run takes it so."""
    for tool, operation in STOPPING_TOOLS.items():
        assert _takes_the_run_id_alone(operation), (
            f"{tool} stops a run with {operation}: AgentAutomationClient.{operation} in "
            "src/agent_automation_mcp/api/client.py must take the run's id first, as agent_run_id, and need nothing "
            "else (a task's cancel sends it so)")
    assert _takes_the_run_id_alone("ban_checks")  # what tests/tasks sends as a stand-in stop
    assert not _takes_the_run_id_alone("resume_agent_run") and not _takes_the_run_id_alone("get_user")


async def _a_handler() -> None:
    """A handler for the declarations above."""


async def _a_handler_without_a_model() -> Annotated[CallToolResult, "a run"]:
    """A handler whose result names no model."""
    raise AssertionError("never called")


def test_a_result_annotated_with_no_model_is_refused_naming_the_tool() -> None:
    toolset = Toolset("webhooks", "scratch")
    toolset.tool("Read", "get_agent_run")(_a_handler_without_a_model)
    with pytest.raises(TypeError, match=rf"tool _a_handler_without_a_model in {source_file(_a_handler_without_a_model)}"
                                        r": its result must be annotated Annotated\[CallToolResult, Model\], Model a "
                                        r"pydantic model; got 'a run'"):
        toolset.tools[0].output  # noqa: B018  # the property refuses


@pytest.mark.anyio
async def test_the_tools_offered_as_tasks_are_those_that_declare_their_run() -> None:
    async with Client(build_server(ApiSettings(), ServerSettings(toolsets=TOOLSETS)), mode="legacy") as client:
        tools = (await client.list_tools()).tools
    tasks = {tool.name for tool in tools if tool.execution is not None and tool.execution.task_support == "optional"}
    assert tasks == {spec.name for spec in all_tools() if spec.run_effect.sets_going}


def test_the_shapes_are_the_pages_own() -> None:
    """Each shape of DRAWN is a test of `showResult` in the page, and the page draws nothing else."""
    body = page().split("function showResult(")[1].split("\n}\n")[0]
    tests = re.findall(r"if \((data && .*?)\) draw\w+\(data\)", body)
    assert tests, "view/runs.html has no showResult tests left: update DRAWN"
    drawn = [sorted({*re.findall(r"data\.(\w+)", test), *re.findall(r"\"(\w+)\" in data", test)}) for test in tests]
    assert drawn == [sorted(fields) for fields in DRAWN.values()], "view/runs.html's showResult changed: update DRAWN"


def _json_types(schema: dict[str, Any]) -> set[str]:
    """The JSON types a property of a model's schema may take (a `$ref` is an object)."""
    if "$ref" in schema:
        return {"object"}
    found = {schema["type"]} if isinstance(schema.get("type"), str) else set(schema.get("type", []))
    return found.union(*(_json_types(option) for option in schema.get("anyOf", [])))


def test_a_tool_whose_result_the_view_draws_declares_it_and_no_other_does() -> None:
    problems = []
    for spec in all_tools():
        properties = spec.output.model_json_schema()["properties"]
        shapes = [shape for shape, needs in DRAWN.items()
                  if all((kind is None and name in properties) or kind in _json_types(properties.get(name, {}))
                         for name, kind in needs.items())]
        if shapes and not spec.viewed:
            problems.append(f"the runs view draws {spec.name}'s result ({shapes[0]}): declare viewed=True in "
                            f"toolset.tool(...) in {spec.source}")
        if spec.viewed and not shapes:
            problems.append(f"{spec.name} declares viewed=True, but its result is none the runs view draws "
                            f"({', '.join(DRAWN)}): leave viewed out in {spec.source}")
    assert not problems, "\n".join(problems)


def _subclasses(model: type[Output]) -> list[type[Output]]:
    return [found for sub in model.__subclasses__() for found in (sub, *_subclasses(sub))]


def test_a_result_that_is_the_services_model_reuses_it() -> None:
    """A tool's result model that has exactly the fields of a service model (`api/models.py`) subclasses it (`class
    User(models.User, Output)`), so that a field the service adds is added once. One that narrows it (drops a field,
    normalises one, adds its own) declares its fields."""
    def fields(model: type[BaseModel]) -> dict[str, str]:  # a field's type and what checks or normalises it
        return {name: f"{info.annotation} {info.metadata}" for name, info in model.model_fields.items()}

    service = [model for model in vars(models).values()
               if isinstance(model, type) and issubclass(model, models.Resource) and model is not models.Resource]
    problems = [f"{output.__name__} ({source_file(output)}) restates {model.__name__} of api/models.py field for "
                f"field: declare it `class {output.__name__}(models.{model.__name__}, Output)` and drop the fields"
                for output in _subclasses(Output) for model in service
                if fields(output) == fields(model) and not issubclass(output, model)]
    assert not problems, "\n".join(problems)


def test_a_default_toolset_declares_its_share_of_the_budget_and_an_opt_in_one_none() -> None:
    with pytest.raises(ValueError, match=r"toolset 'runs' \(tools/runs.py\): a default toolset declares its share"):
        Toolset("runs", "scratch")
    with pytest.raises(ValueError, match=r"toolset 'webhooks' \(tools/webhooks.py\): an opt-in toolset has no share"):
        Toolset("webhooks", "scratch", budget=10)
    assert Toolset("runs", "scratch", budget=10).budget == 10
