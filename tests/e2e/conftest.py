"""End to end: the real `agent-automation-mcp` command in a subprocess, a real MCP client, the sandbox over HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from harness import RATE_LIMITS, HttpServer, sandbox_env

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(run_seconds=1.0, seed=3, rate_limits=parse_rate_limits(RATE_LIMITS))) as server:
        yield server


@pytest.fixture(scope="module")
def http_server(sandbox: SandboxServer) -> Iterator[HttpServer]:
    server = HttpServer(sandbox_env(sandbox, AGENT_AUTOMATION_TOOLSETS="all"))
    yield server
    stderr = server.stop()
    assert sandbox.token not in stderr
