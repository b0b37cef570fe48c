"""The test catalogue (`tests/catalogue.py`) is complete and true: one entry per served tool, in listing
order, whose call succeeds on the sandbox and sends exactly the requests it names."""

from __future__ import annotations

import pytest
from sandboxed import connected

from agent_automation_mcp.api.limits import DEFAULT_RATE_LIMITS
from agent_automation_mcp.api.operations import OPERATIONS
from agent_automation_mcp.sandbox import SandboxConfig
from agent_automation_mcp.tools.registry import TOOLSETS, all_tools
from catalogue import CASES, catalogue_gap

LIMITS = ",".join(f"{bucket}=10000/1s" for bucket in DEFAULT_RATE_LIMITS)  # none ever binds


def test_every_served_tool_has_one_entry_in_listing_order() -> None:
    assert not (gap := catalogue_gap([spec.name for spec in all_tools()])), gap
    moved = [f"{spec.name} is declared in {spec.toolset}, its ToolCase says {case.toolset}"
             for spec, case in zip(all_tools(), CASES, strict=True) if spec.toolset != case.toolset]
    assert not moved, f"{'; '.join(moved)}: correct the ToolCase in tests/catalogue.py"


def test_each_entry_says_what_the_operation_table_derives() -> None:
    specs = {spec.name: spec for spec in all_tools()}
    for case in CASES:
        spec = specs[case.name]
        said = "reads" if spec.read_only else "destroys" if spec.destructive else "writes"
        assert case.effect == said, (f"{case.name}'s operations make it a tool that {said} (api/operations.py); its "
                                     f"ToolCase in tests/catalogue.py says {case.effect}: correct it")
        assert set(case.sends) <= set(spec.operations), (
            f"{case.name}'s ToolCase says it sends {sorted(set(case.sends) - set(spec.operations))}, which its "
            f"toolset.tool(...) does not name: correct `sends` in tests/catalogue.py, or name them in the declaration")


@pytest.mark.anyio
async def test_each_call_succeeds_and_sends_exactly_its_requests() -> None:
    config = SandboxConfig(run_seconds=0.0)
    async with connected(config, rate_limits=LIMITS, toolsets=TOOLSETS) as (client, sandbox):
        sent: dict[str, tuple[str, ...]] = {}
        for case in CASES:
            sandbox.request_log.clear()
            result = await client.call_tool(case.name, case.call)
            assert not result.is_error, (f"{case.name}{case.call} failed on the seeded sandbox: "
                                         f"{result.content[0].text}: correct its call in tests/catalogue.py (ids "
                                         "from sandbox/ids.py)")
            sent[case.name] = tuple(record.operation for record in sandbox.request_log)
    wrong = [f"{case.name} sent {sent[case.name]}, its ToolCase says {case.sends}" for case in CASES
             if sent[case.name] != case.sends]
    assert not wrong, f"{'; '.join(wrong)}: correct `sends` in tests/catalogue.py (in the order sent)"



@pytest.mark.anyio
async def test_without_an_organisation_only_requests_that_need_one_look_it_up() -> None:
    """The operation table says which operations need an organisation: a tool sending none of them (the
    token's organisations, its own user) sends nothing more; the others find the token's only one first."""
    config = SandboxConfig(run_seconds=0.0)
    async with connected(config, org=False, rate_limits=LIMITS, toolsets=TOOLSETS) as (client, sandbox):
        needing = {case.name: any(OPERATIONS[op].needs_org for op in case.sends) for case in CASES}
        for case in sorted(CASES, key=lambda c: needing[c.name]):  # before the organisation is cached
            sandbox.request_log.clear()
            result = await client.call_tool(case.name, case.call)
            assert not result.is_error, (case.name, result.content[0].text)
            sent = tuple(record.operation for record in sandbox.request_log)
            if needing[case.name]:
                assert sent in (case.sends, ("list_organizations", *case.sends)), case.name
            else:
                assert sent == case.sends, case.name
    assert not OPERATIONS["get_current_user"].needs_org and OPERATIONS["get_oauth_token_status"].needs_org
