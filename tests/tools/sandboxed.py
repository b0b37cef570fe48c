"""An MCP client connected in memory to a server that talks to a sandbox over loopback HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client
from mcp.types import CallToolResult, TextContent

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


def service_pages(sandbox: SandboxServer, path: str, items: str, total: str) -> list[dict[str, Any]]:
    """Every item of a paged read (`path` under the organisation), as the service sends them, read without our code:
    pages of 100 until a short one or the `total` the page gives."""
    read: list[dict[str, Any]] = []
    with httpx2.Client(headers={"Authorization": f"Bearer {sandbox.token}"}) as http:
        while True:
            page = http.get(f"{sandbox.url}{path.format(org_id=sandbox.org_id)}",
                            params={"skip": len(read), "limit": 100}).json()
            read += page[items]
            if len(page[items]) < 100 or len(read) >= page[total]:
                return read


def text_tokens(result: CallToolResult) -> int:
    """What a model reads of a result: its text, characters / 4."""
    return sum(len(block.text) for block in result.content if isinstance(block, TextContent)) // 4
