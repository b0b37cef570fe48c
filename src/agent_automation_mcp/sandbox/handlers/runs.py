"""Agent runs: create, read, list, resume, logs, ban/unban/remove-from-PR, and the two operations that start a run
(setup commands, sandbox-log analysis)."""

from __future__ import annotations

from typing import Any

from .. import views
from ..call import Call, Endpoint
from ..errors import CannotDo, NotFound, QuotaReached
from ..inputs import (
    CreateAgentRunInput,
    GenerateSetupCommandsInput,
    LogsQuery,
    ResumeAgentRunInput,
    RunFilters,
    StopAgentRunInput,
)
from ..lifecycle import Run

PLAN_QUOTA_MESSAGE = ("Alloted agent runs for the current billing plan have been reached. "
                      "Please upgrade your plan to continue.")
NO_REPOS_MESSAGE = "No repos found in the organization. Please add some repos and try again."


def _run(call: Call, run_id: int) -> Run:
    run = call.world.run_in_org(call.org.id, run_id)
    if run is None:
        raise NotFound(f"Agent run {run_id} not found")
    return run


def _start(call: Call, *, repo_id: int | None, prompt: str, source_type: str,
           metadata: dict[str, Any] | None = None, model: str | None = None) -> Run:
    return call.world.start_run(org_id=call.org.id, user_id=call.user.id, repo_id=repo_id, prompt=prompt,
                                source_type=source_type, now=call.now, wall=call.wall, metadata=metadata, model=model)


def create_agent_run(call: Call) -> Any:
    body: CreateAgentRunInput = call.body
    org = call.org
    if call.world.created_runs.get(org.id, 0) >= call.config.max_runs:
        raise QuotaReached(PLAN_QUOTA_MESSAGE)
    if body.repo_id is not None:
        repo = call.world.repo_in_org(org.id, body.repo_id)
        if repo is None:
            raise NotFound(f"Repository {body.repo_id} not found in organization {org.id}")
    else:  # the organisation's default repository
        repo = next((r for r in call.world.org_repos(org.id) if not r.archived), None)
        if repo is None:
            raise NotFound(NO_REPOS_MESSAGE)
    run = _start(call, repo_id=repo.id, prompt=body.prompt, source_type="API", metadata=body.metadata,
                 model=body.model)
    run.images = list(body.images or [])
    call.world.created_runs[org.id] = call.world.created_runs.get(org.id, 0) + 1
    return views.agent_run(call.world, run)


def get_agent_run(call: Call) -> Any:
    return views.agent_run(call.world, _run(call, call.path["agent_run_id"]))


def list_agent_runs(call: Call) -> Any:
    filters: RunFilters = call.query
    runs = [run for run in call.world.runs.values() if run.organization_id == call.org.id
            and (filters.user_id is None or run.user_id == filters.user_id)
            and (filters.source_type is None or run.source_type == filters.source_type)]
    runs.sort(key=lambda run: run.id, reverse=True)  # newest first
    return views.page(runs, filters.skip, filters.limit, lambda run: views.agent_run(call.world, run))


def resume_agent_run(call: Call) -> Any:
    body: ResumeAgentRunInput = call.body
    run = _run(call, body.agent_run_id)
    run.pending.clear()  # the user's message interrupts whatever was still to come
    call.world.resume_run(run, body.prompt, call.now, call.wall)
    return views.agent_run(call.world, run)


def get_agent_run_logs(call: Call) -> Any:
    query: LogsQuery = call.query
    return views.agent_run_logs(_run(call, call.path["agent_run_id"]), query.skip, query.limit, query.reverse)


def ban_checks(call: Call) -> Any:
    return _ban(call, done="Banned all checks for", nothing="nothing to ban")


def remove_from_pull_request(call: Call) -> Any:
    """The same effect as a ban, under a friendlier name."""
    return _ban(call, done="Removed Codegen from", nothing="nothing to remove")


def _ban(call: Call, *, done: str, nothing: str) -> Any:
    run = _run(call, call.body.agent_run_id)
    pr, stopped = call.world.ban(run)
    message = f"{done} pull request #{pr.number}" if pr else f"Agent run {run.id} has no pull request; {nothing}"
    return {"success": True, "message": message, "agent_run_id": run.id, "pull_request_id": pr.id if pr else None,
            "stopped_agent_run_ids": stopped}


def unban_checks(call: Call) -> Any:
    run = _run(call, call.body.agent_run_id)
    pr = call.world.unban(run)
    message = (f"Unbanned all checks for pull request #{pr.number}" if pr
               else f"Agent run {run.id} has no pull request; nothing to unban")
    return {"success": True, "message": message, "agent_run_id": run.id, "pull_request_id": pr.id if pr else None}


def generate_setup_commands(call: Call) -> Any:
    body: GenerateSetupCommandsInput = call.body
    repo = call.world.repo_in_org(call.org.id, body.repo_id)
    if repo is None:
        raise NotFound(f"Repository {body.repo_id} not found")
    if repo.archived:
        raise CannotDo(f"Repository {repo.full_name} is archived")
    run = _start(call, repo_id=repo.id, prompt=body.prompt or f"Generate setup commands for {repo.full_name}",
                 source_type="SETUP_COMMANDS", metadata={"trigger_source": body.trigger_source})
    return {"agent_run_id": run.id, "status": run.status, "url": run.web_url}


def analyze_sandbox_logs(call: Call) -> Any:
    sandbox_id = call.path["sandbox_id"]
    sandbox = call.world.sandboxes.get(sandbox_id)
    if sandbox is None or sandbox.organization_id != call.org.id:
        raise NotFound(f"Sandbox {sandbox_id} not found")
    if not sandbox.has_logs:
        raise CannotDo(f"No logs available for sandbox {sandbox_id}")
    run = _start(call, repo_id=None, prompt=f"Analyze the logs of sandbox {sandbox_id}", source_type="API",
                 metadata={"sandbox_id": sandbox_id})
    return {"agent_run_id": run.id, "status": run.status,
            "message": f"Started agent run {run.id} to analyze the logs of sandbox {sandbox_id}"}


ENDPOINTS = {
    "create_agent_run": Endpoint(create_agent_run, body=CreateAgentRunInput),
    "get_agent_run": Endpoint(get_agent_run),
    "list_agent_runs": Endpoint(list_agent_runs, query=RunFilters),
    "resume_agent_run": Endpoint(resume_agent_run, body=ResumeAgentRunInput),
    "get_agent_run_logs": Endpoint(get_agent_run_logs, query=LogsQuery),
    "ban_checks": Endpoint(ban_checks, body=StopAgentRunInput),
    "unban_checks": Endpoint(unban_checks, body=StopAgentRunInput),
    "remove_from_pull_request": Endpoint(remove_from_pull_request, body=StopAgentRunInput),
    "generate_setup_commands": Endpoint(generate_setup_commands, body=GenerateSetupCommandsInput),
    "analyze_sandbox_logs": Endpoint(analyze_sandbox_logs),
}
