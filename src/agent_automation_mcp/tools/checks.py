"""Toolset `checks`: stop or restart CI-check processing for an agent run's pull request."""

from __future__ import annotations

from typing import Annotated, Any, Final

from mcp.server.mcpserver import Context, Resolve
from mcp.types import CallToolResult

from ..api.operations import RUN_STOPPERS
from ..api.params import Id
from .callers import client_for
from .confirm import Answer, Question, ask, require_confirmation
from .declarations import Toolset
from .results import Output, ok, reported

toolset = Toolset("checks", "Stop or restart CI-check processing for a run's pull request, or take the agent off it.",
                  budget=310)


class ChecksChange(Output):
    agent_run_id: int
    action: str  # what was asked: ban, unban or remove
    done: bool | None  # whether the service's answer says it acted; null when the answer does not say
    pull_request_id: int | None = None  # the pull request the service says it acted on
    stopped_agent_run_ids: list[int] | None = None  # the runs the service says it stopped; null when not said
    response: dict[str, Any]


# How each action reads in a summary: what was done, and the word for doing nothing.
_DONE = {"ban": "Checks banned on", "unban": "Checks unbanned on", "remove": "Agent removed (checks banned) from"}
_VERB = {"ban": "banned", "unban": "unbanned", "remove": "removed"}


def checks_result(action: str, agent_run_id: int, response: dict[str, Any]) -> CallToolResult:
    """The result of a ban, unban or removal, built from what the service's answer says it did, and nothing more:
    the pull request it names, the runs it says it stopped, whether it says it succeeded. An answer that says
    none of these (the contract leaves the body unspecified) is reported as accepted, not as done."""
    pr = reported(response, ("pull_request_id", "pr_id"), int)
    stopped_list = response.get("stopped_agent_run_ids")
    stopped = [i for i in stopped_list if isinstance(i, int)] if isinstance(stopped_list, list) else None
    success = reported(response, ("success",), bool)
    names_no_pr = "pull_request_id" in response and response["pull_request_id"] is None
    done = False if success is False or names_no_pr else True if pr is not None else None
    out = ChecksChange(agent_run_id=agent_run_id, action=action, done=done, pull_request_id=pr,
                       stopped_agent_run_ids=stopped, response=response)
    runs = "" if stopped is None else (
        f"; the service reports it stopped run{'s' if len(stopped) > 1 else ''} {', '.join(map(str, stopped))}"
        if stopped else "; the service reports it stopped no run")
    if success is False:
        said = f"Not {_VERB[action]}: the service reports failure for run {agent_run_id} (its message is in response)"
    elif names_no_pr:
        said = (f"Nothing {_VERB[action]}: the service names no pull request for run {agent_run_id} "
                "(its message is in response)")
    elif pr is not None:
        said = f"{_DONE[action]} pull request pr_id {pr} (of run {agent_run_id})"
    else:
        return ok(out, f"The service accepted the {action} request for run {agent_run_id} but its answer does not "
                       "say which pull request or runs it affected (its answer is in response)")
    return ok(out, said + runs)


def _ban_question(agent_run_id: int, ctx: Context) -> Question:
    return ask(ctx, f"Ban checks on the pull request of agent run {agent_run_id}: its CI failures will no longer "
                    "be fixed, and every agent working on it will be stopped.")


@toolset.tool("Ban checks", "ban_checks", closest_to_stop=True)
async def ban_checks(agent_run_id: Id, ctx: Context,
                     confirmed: Annotated[Answer, Resolve(_ban_question)]) -> Annotated[CallToolResult, ChecksChange]:
    """Stop processing CI check failures on the pull request of an agent run, and stop every agent working
    on that pull request. Only on the user's explicit request; undo with unban_checks. The service does not
    report whether its checks are banned."""
    require_confirmation(confirmed, "ban_checks")
    return checks_result("ban", agent_run_id, await (await client_for(ctx)).ban_checks(agent_run_id))


# The tool that comes closest to cancelling a run while no operation stops one (`RUN_STOPPERS`), as its description
# then says: what a task's cancel and the instructions name (`tasks/`, `missing_actions`); None once one does.
CLOSEST_TO_CANCEL: Final = None if RUN_STOPPERS else next(spec.name for spec in toolset.tools if spec.closest_to_stop)


@toolset.tool("Unban checks", "unban_checks")
async def unban_checks(agent_run_id: Id, ctx: Context) -> Annotated[CallToolResult, ChecksChange]:
    """Resume processing CI check failures on the pull request of an agent run: reverses ban_checks and
    remove_from_pull_request. Stopped runs stay stopped (resume_agent_run restarts one)."""
    return checks_result("unban", agent_run_id, await (await client_for(ctx)).unban_checks(agent_run_id))


def _removal_question(agent_run_id: int, ctx: Context) -> Question:
    return ask(ctx, f"Take the agent off the pull request of agent run {agent_run_id}: it will stop working on it "
                    "and stop reacting to its checks and comments.")


@toolset.tool("Remove from pull request", "remove_from_pull_request")
async def remove_from_pull_request(agent_run_id: Id, ctx: Context,
                                   confirmed: Annotated[Answer, Resolve(_removal_question)]) -> Annotated[
        CallToolResult, ChecksChange]:
    """Take the agent off the pull request of an agent run: the same as ban_checks (its checks are banned,
    its agents stopped) under another name; unban_checks reverses it. Only on the user's explicit request."""
    require_confirmation(confirmed, "remove_from_pull_request")
    response = await (await client_for(ctx)).remove_from_pull_request(agent_run_id)
    return checks_result("remove", agent_run_id, response)
