"""Rate-limit answers say what is true (issue 47): after the service's 429, which limit it refused, the wait it asked
for and which tools share that limit; the next call held back by it names the same cause and the service's wait."""

from __future__ import annotations

import pytest
from sandboxed import connected

from agent_automation_mcp.api.limits import AGENT_CREATION, DEFAULT_RATE_LIMITS
from agent_automation_mcp.api.operations import OPERATIONS
from agent_automation_mcp.pacing import sliding_log
from agent_automation_mcp.sandbox import SandboxConfig
from agent_automation_mcp.tools.registry import TOOLSETS, all_tools
from sandbox_faults import refuse


@pytest.mark.anyio
async def test_a_long_429_on_standard_says_every_tool_waits_and_the_next_call_says_the_services_wait() -> None:
    async with connected(SandboxConfig(run_seconds=1.0), toolsets=TOOLSETS) as (client, sandbox):
        refuse(sandbox, "list_agent_runs", 150)
        first = await client.call_tool("list_agent_runs", {})
        before = len(sandbox.request_log)
        second = await client.call_tool("get_user", {})
        sent = sandbox.request_log[before:]
    refused, held = (first.structured_content or {})["error"], (second.structured_content or {})["error"]
    assert refused["kind"] == "rate_limited" and refused["retry_after_seconds"] == 150
    assert "refused list_agent_runs (429) and asked to wait 150 s" in refused["message"]
    assert "It refused under its limit standard (" in refused["hint"]
    assert refused["hint"].endswith("Every tool counts against standard.") and "still work" not in refused["hint"]
    assert held["kind"] == "rate_limited" and sent == []  # held back: nothing was sent
    assert "the service refused a request of this API token" in held["message"]
    assert "asked to wait 150 s" in held["message"] and "rate limit (" not in held["message"]
    assert sliding_log.MAX_PAUSE < held["retry_after_seconds"] <= 150  # the service's wait, not the pause's
    assert held["hint"].endswith("Every tool counts against standard.")


@pytest.mark.anyio
async def test_a_limit_of_one_tool_names_that_tool_and_only_where_it_is_offered() -> None:
    async with connected(SandboxConfig(run_seconds=1.0), toolsets=TOOLSETS) as (client, sandbox):
        refuse(sandbox, "create_agent_run", 99999)
        first = await client.call_tool("create_agent_run", {"prompt": "x"})
        second = await client.call_tool("create_agent_run", {"prompt": "x"})
    refused, held = (first.structured_content or {})["error"], (second.structured_content or {})["error"]
    # The tools whose operations the limit counts, as the declarations make them (today create_agent_run alone).
    counted = [spec.name for spec in all_tools() if any(AGENT_CREATION in OPERATIONS[op].buckets
                                                        for op in spec.operations)]
    said = (f"{counted[0]} alone counts" if len(counted) == 1 else f"{', '.join(counted[:-1])} and {counted[-1]} count"
            ) + f" against {AGENT_CREATION}."
    assert "create_agent_run" in counted and "does not say which it refused" in refused["hint"]
    assert refused["hint"].endswith(f"{said} Every tool counts against standard."), refused["hint"]
    holding = f"{AGENT_CREATION} ({DEFAULT_RATE_LIMITS[AGENT_CREATION]}), this one too"  # its pause holds it back
    assert holding in held["message"], held["message"]
    assert held["hint"].endswith(said), held["hint"]
