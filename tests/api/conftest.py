"""The client against a real sandbox on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import pytest

from agent_automation_mcp.api import AgentAutomationClient, ApiTransport, Credentials
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(run_seconds=1.0, seed=11)) as server:
        yield server


def settings_for(sandbox: SandboxServer, **overrides: Any) -> ApiSettings:
    values: dict[str, Any] = {"token": sandbox.token, "org_id": sandbox.org_id, "base_url": sandbox.url,
                              "timeout": 5.0}
    values.update(overrides)
    return ApiSettings(**values)


@pytest.fixture
async def client(sandbox: SandboxServer) -> AsyncIterator[AgentAutomationClient]:
    async with ApiTransport(settings_for(sandbox)) as transport:
        yield AgentAutomationClient(transport, Credentials(sandbox.token, sandbox.org_id)).within(20)


def requests_log(sandbox: SandboxServer) -> list[dict[str, Any]]:
    return httpx2.get(f"{sandbox.url}/_sandbox/requests").json()
