"""`agent-automation-mcp demo`: the sandbox, the real server over stdio and a real MCP client, in one command.

It walks through what an assistant would do with a new task and prints what each tool returned, briefly.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent

from .sandbox import SandboxConfig, SandboxServer


def run_demo(args: argparse.Namespace) -> int:
    return anyio.run(_demo, args.run_seconds, args.log_level)


def _show(text: str = "") -> None:
    print(text, flush=True)


class Session:
    def __init__(self, client: Client) -> None:
        self.client = client

    async def call(self, name: str, arguments: dict[str, Any], *, show_progress: bool = False) -> dict[str, Any]:
        _show(f"\n→ {name}({', '.join(f'{k}={json.dumps(v)}' for k, v in arguments.items())})")

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            _show(f"    … {message}")

        result: CallToolResult = await self.client.call_tool(
            name, arguments, progress_callback=on_progress if show_progress else None)
        marker = "✗" if result.is_error else "←"
        first = result.content[0] if result.content else None
        _show(f"  {marker} {first.text if isinstance(first, TextContent) else ''}")
        return result.structured_content or {}


async def _demo(run_seconds: float, log_level: str) -> int:
    started = time.monotonic()
    async with SandboxServer(SandboxConfig(run_seconds=run_seconds, seed=7)) as sandbox:
        _show(f"Sandbox (a local simulator of the service) at {sandbox.url}; starting the MCP server over stdio.")
        env = {**os.environ, "AGENT_AUTOMATION_BASE_URL": sandbox.url, "AGENT_AUTOMATION_API_TOKEN": sandbox.token,
               "AGENT_AUTOMATION_ORG_ID": str(sandbox.org_id), "AGENT_AUTOMATION_TOOLSETS": "all",
               "AGENT_AUTOMATION_READ_ONLY": ""}
        server = StdioServerParameters(command=sys.executable, env=env,
                                       args=["-m", "agent_automation_mcp", "serve", "--log-level", log_level])
        async with Client(server) as client:
            tools = (await client.list_tools()).tools
            _show(f"Connected over stdio (protocol {client.protocol_version}); the server offers {len(tools)} tools.")
            await _walk_through(Session(client))
    _show(f"\nDone in {time.monotonic() - started:.1f} s. Next: configure your MCP client (see README.md), "
          "or run `agent-automation-mcp --sandbox` to try it from one.")
    return 0


async def _walk_through(s: Session) -> None:
    repos = await s.call("list_repositories", {"limit": 5})
    repo_id = repos["repositories"][0]["id"]
    run = await s.call("create_agent_run", {"prompt": "Add a CONTRIBUTING.md that explains how to run the tests",
                                             "repo_id": repo_id})
    run_id = run["id"]
    run = await s.call("get_agent_run", {"agent_run_id": run_id, "wait_seconds": 30}, show_progress=True)

    skip: int | None = 0
    for _ in range(3):  # the trace, page by page
        page = await s.call("get_agent_run_logs", {"agent_run_id": run_id, "skip": skip, "limit": 5})
        _show("    " + ", ".join(str(entry.get("message_type")) for entry in page.get("entries", [])))
        skip = page.get("next_skip")
        if skip is None:
            break
    await s.call("get_agent_run_logs", {"agent_run_id": run_id, "message_types": ["FINAL_ANSWER", "ERROR"],
                                        "all_pages": True}, show_progress=True)

    await s.call("ban_checks", {"agent_run_id": run_id})
    await s.call("unban_checks", {"agent_run_id": run_id})

    prs = run.get("pull_requests") or []
    if not prs:  # this run opened none: use the newest run that did
        runs = await s.call("list_agent_runs", {"limit": 20})
        prs = next((r["pull_requests"] for r in runs.get("runs", []) if r.get("pull_requests")), [])
    if prs:
        await s.call("edit_pull_request", {"pr_id": prs[0]["pr_id"], "state": "ready_for_review"})

    await s.call("get_check_suite_settings", {"repo_id": repo_id})
    await s.call("update_check_suite_settings", {"repo_id": repo_id, "check_retry_count": 3,
                                                 "ignored_checks": ["lint"]})
    await s.call("get_oauth_token_status", {})
    await s.call("revoke_oauth_tokens", {"provider": "github"})
    _show("\nAnd what a failure looks like (the same shape for every tool):")
    await s.call("get_agent_run", {"agent_run_id": 987654321})
