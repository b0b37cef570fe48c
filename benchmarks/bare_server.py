"""The SDK's bare server, the baseline of the HTTP benchmarks: what serving these calls costs with nothing of ours.

    AGENT_AUTOMATION_API_TOKEN=T python benchmarks/bare_server.py --port 8001 --base-url URL [--org-id 1]

An `MCPServer` with the read tools the benchmarks call, under the same names and arguments: each forwards the
caller's `Authorization` header (else the token from the environment) to the service over one pooled
`httpx2.AsyncClient`, in the organisation of `X-Organization-Id` (else `--org-id`), and returns the service's JSON
as it came. No pacing, no typed models, no error shape, no trimming: only the SDK's Streamable HTTP serving
(stateless, both protocol eras, the same defaults as ours otherwise) and one upstream request per call.
With `--our-list`, `tools/list` answers with our server's default list (the same definitions, built once at
start and answered by the SDK's own handler), so the two serve the same bytes.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import Tool


class ListingServer(MCPServer[httpx2.AsyncClient]):
    """Lists the tools it is given instead of its own (their calls are not served)."""

    def __init__(self, listed: list[Tool], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.listed = listed

    async def list_tools(self) -> list[Tool]:
        return self.listed


def our_list() -> list[Tool]:
    """Our server's `tools/list` with the default settings, as it serves it."""
    from agent_automation_mcp.api.settings import ApiSettings
    from agent_automation_mcp.config import ServerSettings
    from agent_automation_mcp.server import build_server

    return anyio.run(build_server(ApiSettings(), ServerSettings()).list_tools)


def build_bare_server(base_url: str, token: str | None, org_id: int,
                      listed: list[Tool] | None = None) -> MCPServer[httpx2.AsyncClient]:
    @asynccontextmanager
    async def lifespan(server: MCPServer[httpx2.AsyncClient]) -> AsyncIterator[httpx2.AsyncClient]:
        async with httpx2.AsyncClient(base_url=base_url, timeout=30) as http:
            yield http

    server: MCPServer[httpx2.AsyncClient] = (
        MCPServer(name="bare", lifespan=lifespan, log_level="WARNING") if listed is None
        else ListingServer(listed, name="bare", lifespan=lifespan, log_level="WARNING"))

    async def get(ctx: Context[httpx2.AsyncClient, Any], path: str, params: dict[str, Any] | None = None) -> Any:
        headers = ctx.headers or {}
        authorization = headers.get("authorization") or (f"Bearer {token}" if token else "")
        org = headers.get("x-organization-id") or org_id
        response = await ctx.request_context.lifespan_context.get(
            f"/v1/organizations/{org}{path}", params={k: v for k, v in (params or {}).items() if v is not None},
            headers={"Authorization": authorization})
        response.raise_for_status()
        return response.json()

    @server.tool()
    async def get_agent_run(agent_run_id: int, ctx: Context[httpx2.AsyncClient, Any]) -> dict[str, Any]:
        """One agent run."""
        return await get(ctx, f"/agent/run/{agent_run_id}")

    @server.tool()
    async def list_agent_runs(ctx: Context[httpx2.AsyncClient, Any], skip: int = 0, limit: int = 20,
                              user_id: int | None = None) -> dict[str, Any]:
        """Agent runs, newest first."""
        return await get(ctx, "/agent/runs", {"skip": skip, "limit": limit, "user_id": user_id})

    @server.tool()
    async def get_agent_run_logs(agent_run_id: int, ctx: Context[httpx2.AsyncClient, Any], skip: int = 0,
                                 limit: int = 100) -> dict[str, Any]:
        """One page of an agent run's trace."""
        return await get(ctx, f"/agent/run/{agent_run_id}/logs", {"skip": skip, "limit": limit})

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--org-id", type=int, default=1)
    parser.add_argument("--our-list", action="store_true", help="tools/list answers with our server's default list")
    args = parser.parse_args()
    server = build_bare_server(args.base_url.rstrip("/"), os.environ.get("AGENT_AUTOMATION_API_TOKEN"), args.org_id,
                               our_list() if args.our_list else None)
    anyio.run(lambda: server.run_streamable_http_async(host="127.0.0.1", port=args.port, stateless_http=True))


if __name__ == "__main__":
    main()
