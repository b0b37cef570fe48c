"""An MCP client connected in memory to a server that talks to a sandbox over loopback HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import Client

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.server import build_server


@asynccontextmanager
async def connected(config: SandboxConfig | None = None, *, org: bool = True, rate_limits: str | None = None,
                    **settings: Any) -> AsyncIterator[tuple[Client, SandboxServer]]:
    config = config or SandboxConfig(run_seconds=1.0)
    async with SandboxServer(config) as sandbox:
        api = ApiSettings(token=sandbox.token, org_id=sandbox.org_id if org else None, base_url=sandbox.url,
                          rate_limits=parse_rate_limits(rate_limits))
        async with Client(build_server(api, ServerSettings(**settings))) as client:
            yield client, sandbox
