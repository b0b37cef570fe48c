"""The SDK's bare servers, the floors of the benchmarks: what serving these calls costs with nothing of ours.

    AGENT_AUTOMATION_API_TOKEN=T python benchmarks/bare_server.py --port 8001 --base-url URL [--org-id 1]
    AGENT_AUTOMATION_API_TOKEN=T python benchmarks/bare_server.py --transport stdio --base-url URL [--org-id 1]
    python benchmarks/bare_server.py --echo

The forwarding floor is an `MCPServer` with the read tools the benchmarks call, under the same names and arguments:
each forwards the caller's `Authorization` header (else the token from the environment) to the service over one
pooled `httpx2.AsyncClient`, in the organisation of `X-Organization-Id` (else `--org-id`), and returns the service's
JSON as it came. No pacing, no typed models, no error shape, no trimming: only the SDK's Streamable HTTP serving
(stateless, both protocol eras, the same defaults as ours otherwise) and one upstream request per call. It runs the
SDK's app under uvicorn as `run_streamable_http_async` does, on the same HTTP stack as ours (the event loop and HTTP
parser `remote/serve.py` picks), so the two differ only in what each does per request; `--stack sdk` keeps uvicorn's
and anyio's defaults instead (asyncio's loop), as the SDK's own runner does, and `--stack granian` serves the same
app on Granian (Rust's hyper and tokio; one worker process on uvloop), the other ASGI server measured for
`remote/serve.py`'s choice. With `--our-list`, `tools/list` answers with our server's default list (the same
definitions, built once at start and answered by the SDK's own handler), so the two serve the same bytes. Over stdio
it serves the same tools with the token from the environment. The echo floor (`--echo`, stdio) is an `MCPServer`
with one tool that echoes its argument: what starting a server and answering `tools/list` costs with the SDK alone.
Either floor imports no more than the SDK itself does (uvicorn and our HTTP stack only when serving HTTP), so a
start-up is the SDK's.
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


def build_echo_server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer(name="echo", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """The text it is given."""
        return text

    return server


def granian_app() -> Any:
    """The app for a Granian worker, a process of its own that rebuilds it from the arguments in the environment."""
    base_url, org_id, our = os.environ["BARE_SERVER_ARGS"].split("|")
    server = build_bare_server(base_url, os.environ.get("AGENT_AUTOMATION_API_TOKEN"), int(org_id),
                               our_list() if our else None)
    return server.streamable_http_app(stateless_http=True, host="127.0.0.1")


def serve_granian(port: int, base_url: str, org_id: int, our: bool) -> None:
    from granian import Granian
    from granian.constants import Interfaces, Loops, RuntimeModes

    os.environ["BARE_SERVER_ARGS"] = f"{base_url}|{org_id}|{'1' if our else ''}"
    Granian("bare_server:granian_app", address="127.0.0.1", port=port, interface=Interfaces.ASGI, factory=True,
            workers=1, runtime_mode=RuntimeModes.st, loop=Loops.uvloop, websockets=False, log_enabled=False).serve()


def serve_http(server: MCPServer[Any], port: int, stack: str) -> None:
    import uvicorn

    from agent_automation_mcp.remote.serve import http_protocol, loop_options

    app = server.streamable_http_app(stateless_http=True, host="127.0.0.1")  # as run_streamable_http_async builds it
    ours = stack == "ours"
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                            http=http_protocol() if ours else "auto")
    anyio.run(uvicorn.Server(config).serve, backend_options=loop_options() if ours else {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=("http", "stdio"), default="http")
    parser.add_argument("--echo", action="store_true", help="the echo floor over stdio: one tool, no upstream")
    parser.add_argument("--port", type=int, help="HTTP: the port to listen on")
    parser.add_argument("--base-url", help="the service's URL (all but --echo)")
    parser.add_argument("--org-id", type=int, default=1)
    parser.add_argument("--our-list", action="store_true", help="tools/list answers with our server's default list")
    parser.add_argument("--stack", choices=("ours", "sdk", "granian"), default="ours",
                        help="ours: our event loop and HTTP parser; sdk: the SDK runner's (asyncio, uvicorn's auto); "
                             "granian: Granian instead of uvicorn")
    args = parser.parse_args()
    if args.echo:
        anyio.run(build_echo_server().run_stdio_async)
        return
    if args.base_url is None or (args.transport == "http" and args.port is None):
        parser.error("--base-url is needed (and --port over HTTP)")
    if args.stack == "granian":
        serve_granian(args.port, args.base_url.rstrip("/"), args.org_id, args.our_list)
        return
    server = build_bare_server(args.base_url.rstrip("/"), os.environ.get("AGENT_AUTOMATION_API_TOKEN"), args.org_id,
                               our_list() if args.our_list else None)
    if args.transport == "stdio":
        anyio.run(server.run_stdio_async)
    else:
        serve_http(server, args.port, args.stack)


if __name__ == "__main__":
    main()
