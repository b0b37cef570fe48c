"""Toolset `setup`: agent runs that prepare a repository's sandbox (setup commands, log analysis)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from ..api.models import LogAnalysis, SetupCommands
from ..api.params import Id, Prompt
from .callers import client_for
from .declarations import Toolset
from .results import label, ok

toolset = Toolset("setup", "Runs that work out a repository's setup commands or explain a sandbox's setup logs.")


@toolset.tool("Generate setup commands", "generate_setup_commands", run_field="agent_run_id")
async def generate_setup_commands(
    repo_id: Annotated[Id, Field(description="Repository id; see list_repositories.")], ctx: Context,
    prompt: Annotated[Prompt | None, Field(description="Extra guidance for the setup agent.")] = None,
) -> Annotated[CallToolResult, SetupCommands]:
    """Start an agent run that works out the commands to install and build a repository in its sandbox.
    Follow the run with get_agent_run. Limit: 5 per minute."""
    out = await (await client_for(ctx)).generate_setup_commands(repo_id, prompt)
    return ok(out, f"Setup-command run {out.agent_run_id} started ({label(out.status)})")


@toolset.tool("Analyze sandbox logs", "analyze_sandbox_logs", run_field="agent_run_id")
async def analyze_sandbox_logs(
    sandbox_id: Annotated[Id, Field(description=(
        "A repository's setup sandbox, as the Codegen web app shows it (no tool lists sandboxes); "
        "not an agent run id."))], ctx: Context,
) -> Annotated[CallToolResult, LogAnalysis]:
    """Start an agent run that analyses a sandbox's setup logs and explains failures. Follow the run with
    get_agent_run. Limit: 5 per minute."""
    out = await (await client_for(ctx)).analyze_sandbox_logs(sandbox_id)
    return ok(out, f"Log-analysis run {out.agent_run_id} started ({label(out.status)})")
