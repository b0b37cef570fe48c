"""Toolset `checks`: stop or restart CI-check processing for an agent run's pull request."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult

from ..api.params import Id
from .callers import client_for
from .registry import Toolset
from .results import Output, ok

toolset = Toolset("checks")


class ChecksChange(Output):
    agent_run_id: int
    action: str
    response: dict[str, Any]


@toolset.tool("Ban checks", "ban_checks")
async def ban_checks(agent_run_id: Id, ctx: Context) -> Annotated[CallToolResult, ChecksChange]:
    """Stop processing CI check failures on the pull request of an agent run, and stop every agent working
    on that pull request. Use when automatic check fixing loops or is unwanted; undo with unban_checks."""
    response = await (await client_for(ctx)).ban_checks(agent_run_id)
    return ok(ChecksChange(agent_run_id=agent_run_id, action="banned", response=response),
              f"Checks banned for the pull request of run {agent_run_id}; its agents were stopped")


@toolset.tool("Unban checks", "unban_checks")
async def unban_checks(agent_run_id: Id, ctx: Context) -> Annotated[CallToolResult, ChecksChange]:
    """Resume processing CI check failures on the pull request of an agent run (removes any ban)."""
    response = await (await client_for(ctx)).unban_checks(agent_run_id)
    return ok(ChecksChange(agent_run_id=agent_run_id, action="unbanned", response=response),
              f"Checks unbanned for the pull request of run {agent_run_id}")


@toolset.tool("Remove from pull request", "remove_from_pull_request")
async def remove_from_pull_request(agent_run_id: Id, ctx: Context) -> Annotated[CallToolResult, ChecksChange]:
    """Take the agent off the pull request of an agent run: it stops working on that pull request and
    stops reacting to its checks and comments."""
    response = await (await client_for(ctx)).remove_from_pull_request(agent_run_id)
    return ok(ChecksChange(agent_run_id=agent_run_id, action="removed", response=response),
              f"Removed from the pull request of run {agent_run_id}")
