"""Tags are matched as people mean them (issue 47): `list_agent_runs(metadata={"sprint": 14})` finds a run another
script tagged `"sprint": "14"`, and the description says how values are compared."""

from __future__ import annotations

from typing import Any

import pytest
from sandboxed import connected

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig
from agent_automation_mcp.tools.run_filters import metadata_matches
from catalogue import REPO_ID

TAGGED: dict[str, dict[str, Any]] = {
    "number": {"sprint": 14},
    "text": {"sprint": "14"},
    "decimal": {"sprint": 14.0},
    "spaced and capitalised key": {"Sprint": " 14 "},
    "leading zero": {"sprint": "014"},
    "another sprint": {"sprint": 15},
    "labels": {"labels": ["bug", "UI"], "team": "Platform"},
    "flag as text": {"urgent": "TRUE"},
    "flag": {"urgent": True},
    "flag as one": {"urgent": 1},
    "nested": {"ci": {"stage": "build", "attempt": 2}, "sprint": None},
}
CREATING = "agent_creation=100/60s"  # a run per tag, at once


@pytest.mark.anyio
async def test_a_tag_finds_the_runs_tagged_with_its_text_or_number_alike() -> None:
    config = SandboxConfig(run_seconds=1.0, rate_limits=parse_rate_limits(CREATING))
    async with connected(config, rate_limits=CREATING) as (client, _):
        ids = {name: (await client.call_tool("create_agent_run", {"prompt": f"Tagged {name}", "repo_id": REPO_ID,
                                                                   "metadata": tag})).structured_content["id"]
               for name, tag in TAGGED.items()}
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}

        async def found(metadata: dict[str, Any]) -> set[str]:
            result = await client.call_tool("list_agent_runs", {"metadata": metadata, "limit": 100})
            assert not result.is_error, result.content[0].text
            return {name for name, run_id in ids.items() if run_id in {r["id"] for r in
                                                                        result.structured_content["runs"]}}

        sprint = await found({"sprint": 14})
        sprint_text = await found({"SPRINT": "14"})
        label = await found({"labels": "ui"})
        labels = await found({"labels": ["ui", "bug"], "team": "platform"})
        urgent = await found({"urgent": "true"})
        nested = await found({"ci": {"stage": "BUILD"}})
        unset = await found({"sprint": None})
    assert sprint == sprint_text == {"number", "text", "decimal", "spaced and capitalised key"}
    assert label == labels == {"labels"}
    assert urgent == {"flag as text", "flag"}  # true is not 1
    assert nested == {"nested"} and unset == {"nested"}
    described = tools["list_agent_runs"].input_schema["properties"]["metadata"]["description"]
    assert '14 = "14"' in described and "any case" in described and "list" in described


@pytest.mark.parametrize(("stored", "wanted", "matches"), [
    ({"sprint": "14"}, {"sprint": 14}, True),
    ({"sprint": 14}, {"sprint": "14.0"}, True),
    ({"sprint": "1e1"}, {"sprint": 10}, True),
    ({"sprint": "014"}, {"sprint": 14}, False),  # not a number as JSON writes one: text
    ({"sprint": "fourteen"}, {"sprint": 14}, False),
    ({"owner": "Ada"}, {"OWNER": "ada "}, True),
    ({"done": False}, {"done": "False"}, True),
    ({"done": False}, {"done": 0}, False),
    ({"done": None}, {"done": "null"}, False),
    ({"tags": ["a", "b"]}, {"tags": ["b"]}, True),
    ({"tags": ["a", "b"]}, {"tags": ["b", "c"]}, False),
    ({"tags": "a"}, {"tags": ["a"]}, False),  # a list asked is held only by a list
    ({"build": {"stage": "test", "n": 3}}, {"build": {"n": "3"}}, True),
    ({"build": {"stage": "test"}}, {"build": "test"}, False),
    ({"sprint": 14}, {"sprint": 14, "team": "x"}, False),  # every key asked
    (None, {"sprint": 14}, False),
])
def test_metadata_values_are_compared_as_people_mean_them(stored: dict[str, Any] | None, wanted: dict[str, Any],
                                                           matches: bool) -> None:
    assert metadata_matches(stored, wanted) is matches


def test_deep_metadata_is_compared_whole_past_a_depth_without_failing() -> None:
    deep: Any = "x"
    for _ in range(2000):
        deep = [deep]
    assert metadata_matches({"deep": deep}, {"deep": deep}) is True
    assert metadata_matches({"deep": deep}, {"deep": [[["y"]]]}) is False
