"""Toolset `checks`: stop or restart CI-check processing for an agent run's pull request."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, Resolve
from mcp.types import CallToolResult

from ..api.params import Id
from .callers import client_for
from .confirm import Answer, Question, ask, require_confirmation
from .declarations import Toolset
from .results import Output, ok

toolset = Toolset("checks", "Stop or restart CI-check processing for a run's pull request, or take the agent off it.")


class ChecksChange(Output):
    agent_run_id: int
    action: str
    response: dict[str, Any]


def _ban_question(agent_run_id: int, ctx: Context) -> Question:
    return ask(ctx, f"Ban checks on the pull request of agent run {agent_run_id}: its CI failures will no longer "
                    "be fixed, and every agent working on it will be stopped.")


@toolset.tool("Ban checks", "ban_checks")
async def ban_checks(agent_run_id: Id, ctx: Context,
                     confirmed: Annotated[Answer, Resolve(_ban_question)]) -> Annotated[CallToolResult, ChecksChange]:
    """Stop processing CI check failures on the pull request of an agent run, and stop every agent working
    on that pull request. Use when automatic check fixing loops or is unwanted; undo with unban_checks."""
    require_confirmation(confirmed, "ban_checks")
    response = await (await client_for(ctx)).ban_checks(agent_run_id)
    return ok(ChecksChange(agent_run_id=agent_run_id, action="banned", response=response),
              f"Checks banned for the pull request of run {agent_run_id}; its agents were stopped")


@toolset.tool("Unban checks", "unban_checks")
async def unban_checks(agent_run_id: Id, ctx: Context) -> Annotated[CallToolResult, ChecksChange]:
    """Resume processing CI check failures on the pull request of an agent run (removes any ban)."""
    response = await (await client_for(ctx)).unban_checks(agent_run_id)
    return ok(ChecksChange(agent_run_id=agent_run_id, action="unbanned", response=response),
              f"Checks unbanned for the pull request of run {agent_run_id}")


def _removal_question(agent_run_id: int, ctx: Context) -> Question:
    return ask(ctx, f"Take the agent off the pull request of agent run {agent_run_id}: it will stop working on it "
                    "and stop reacting to its checks and comments.")


@toolset.tool("Remove from pull request", "remove_from_pull_request")
async def remove_from_pull_request(agent_run_id: Id, ctx: Context,
                                   confirmed: Annotated[Answer, Resolve(_removal_question)]) -> Annotated[
        CallToolResult, ChecksChange]:
    """Take the agent off the pull request of an agent run: it stops working on that pull request and
    stops reacting to its checks and comments."""
    require_confirmation(confirmed, "remove_from_pull_request")
    response = await (await client_for(ctx)).remove_from_pull_request(agent_run_id)
    return ok(ChecksChange(agent_run_id=agent_run_id, action="removed", response=response),
              f"Removed from the pull request of run {agent_run_id}")
