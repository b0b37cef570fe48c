"""Property-based fuzzing of every tool's arguments through a real MCP client against the sandbox (modest
example counts here; `benchmarks/fuzz.py` makes ≥ 10,000 calls)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from fuzzing import arguments, problem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from agent_automation_mcp.api.limits import DEFAULT_RATE_LIMITS, parse_rate_limits
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.server import build_server
from agent_automation_mcp.tools.registry import TOOLSETS
from catalogue import CASES

LIMITS: Final = ",".join(f"{bucket}=100000/1s" for bucket in DEFAULT_RATE_LIMITS)  # none ever binds
EXAMPLES: Final = 15


@pytest.fixture(scope="module")
def session() -> Iterator[tuple[SandboxServer, BlockingPortal, Client, dict[str, Any]]]:
    limits = parse_rate_limits(LIMITS)
    with SandboxServer(SandboxConfig(run_seconds=0.0, rate_limits=limits)) as sandbox, \
            start_blocking_portal() as portal:
        api = ApiSettings(token=sandbox.token, org_id=sandbox.org_id, base_url=sandbox.url, rate_limits=limits)
        with portal.wrap_async_context_manager(Client(build_server(api, ServerSettings(toolsets=TOOLSETS)))) as client:
            schemas = {tool.name: tool.input_schema for tool in portal.call(client.list_tools).tools}
            yield sandbox, portal, client, schemas


@pytest.mark.parametrize("tool", [case.name for case in CASES])
def test_any_arguments_get_a_result_or_an_error_in_the_one_shape(
        session: tuple[SandboxServer, BlockingPortal, Client, dict[str, Any]], tool: str) -> None:
    sandbox, portal, client, schemas = session
    sandbox.request_log.clear()

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def call(data: st.DataObject) -> None:
        args = data.draw(arguments(schemas[tool]), label="arguments")
        result = portal.call(client.call_tool, tool, args)
        assert problem(result) is None, (args, problem(result))

    call()
    malformed = [(r.path, r.status) for r in sandbox.request_log if r.status == 422]
    assert malformed == []  # the service never had to refuse what this server let through
