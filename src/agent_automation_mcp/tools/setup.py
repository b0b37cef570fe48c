"""Toolset `setup`: agent runs that prepare a repository's sandbox (setup commands, log analysis)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from ..api.errors import InvalidRequestError
from ..api.models import LogAnalysis, SetupCommands
from ..api.params import Id, Prompt
from .callers import client_for, repository_for
from .declarations import Toolset
from .results import label, ok

toolset = Toolset("setup", "Runs that work out a repository's setup commands or explain a sandbox's setup logs.",
                  budget=230)


@toolset.tool("Generate setup commands", "generate_setup_commands", run_field="agent_run_id")
async def generate_setup_commands(
    ctx: Context, repo_id: Annotated[Id | None, Field(description="Repository id; see list_repositories.")] = None,
    prompt: Annotated[Prompt | None, Field(description="Extra guidance for the setup agent.")] = None,
) -> Annotated[CallToolResult, SetupCommands]:
    """Start an agent run that works out the commands to install and build a repository in its sandbox.
    Follow the run with get_agent_run. Limit: 5 per minute."""
    client = await (await client_for(ctx)).in_organization()
    repo_id, default = await repository_for(ctx, client, repo_id, "generate_setup_commands")
    if repo_id is None:
        raise InvalidRequestError("generate_setup_commands: give repo_id; this connection has no default repository",
                                  operation="generate_setup_commands",
                                  hint="Give repo_id (list_repositories lists them); nothing was sent.")
    out = await client.generate_setup_commands(repo_id, prompt)
    on = f" for {default.said()}" if default is not None else ""
    return ok(out, f"Setup-command run {out.agent_run_id} started ({label(out.status)}){on}")


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
