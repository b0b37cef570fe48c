"""The response bodies: world entities rendered in the service's shapes (the reference OpenAPI's schemas)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeVar

from .entities import CheckSuiteSettings, Organization, PullRequest, Repository, User
from .lifecycle import Run
from .world import World

T = TypeVar("T")
Json = dict[str, Any]


def page(items: Sequence[T], skip: int, limit: int, render: Any) -> Json:
    """A `Page_*` envelope: `{items, total, page, size, pages}`."""
    return {"items": [render(item) for item in items[skip: skip + limit]], "total": len(items),
            "page": skip // limit + 1, "size": limit, "pages": math.ceil(len(items) / limit)}


def organization(org: Organization) -> Json:
    return {"id": org.id, "name": org.name, "settings": {"enable_pr_creation": org.enable_pr_creation,
                                                         "enable_rules_detection": org.enable_rules_detection}}


def user(user: User) -> Json:
    return {"id": user.id, "email": f"{user.github_username}@example.com", "github_user_id": user.github_user_id,
            "github_username": user.github_username, "avatar_url": f"https://github.com/{user.github_username}.png",
            "full_name": user.full_name, "role": user.role, "is_admin": user.role == "ADMIN"}


def repository(repo: Repository) -> Json:
    return {"id": repo.id, "name": repo.name, "full_name": repo.full_name, "description": repo.description,
            "github_id": str(700_000_000 + repo.id), "organization_id": repo.organization_id,
            "visibility": repo.visibility, "archived": repo.archived, "setup_status": repo.setup_status,
            "language": repo.language}


def pull_request(pr: PullRequest, quirks: bool = False) -> Json:
    """A `GithubPullRequestResponse`; with `quirks`, also its `state` and `merged`, which the OpenAPI does not name
    and Codegen's own CLI reads."""
    beyond = {"state": pr.state, "merged": pr.merged} if quirks else {}
    return {"id": pr.id, "created_at": pr.created_at, "title": pr.title, "url": pr.url,
            "head_branch_name": pr.head_branch_name, **beyond}


def agent_run(world: World, run: Run) -> Json:
    """An `AgentRunResponse`, with whatever a fixture was given to send beyond it (`beyond_spec`)."""
    prs = [pull_request(world.prs[pr_id], world.config.quirks) for pr_id in run.pull_request_ids]
    return {"id": run.id, "organization_id": run.organization_id, "status": run.status, "created_at": run.created_at,
            "web_url": run.web_url, "result": run.result, "summary": run.summary, "source_type": run.source_type,
            "github_pull_requests": prs, "metadata": run.metadata, **run.beyond_spec}


def agent_run_logs(run: Run, skip: int, limit: int, reverse: bool) -> Json:
    """An `AgentRunWithLogsResponse`: the run and one page of its trace, oldest first unless `reverse`."""
    total = len(run.logs)
    if reverse:
        end = max(total - skip, 0)
        logs = run.logs[max(end - limit, 0): end][::-1]
    else:
        logs = run.logs[skip: skip + limit]
    return {"id": run.id, "organization_id": run.organization_id, "status": run.status, "created_at": run.created_at,
            "web_url": run.web_url, "result": run.result, "metadata": run.metadata, "logs": logs,
            "total_logs": total, "page": skip // limit + 1, "size": limit, "pages": math.ceil(total / limit)}


def check_suite_settings(settings: CheckSuiteSettings) -> Json:
    return {"check_retry_count": settings.check_retry_count, "ignored_checks": list(settings.ignored_checks),
            "check_retry_counts": dict(settings.check_retry_counts), "custom_prompts": dict(settings.custom_prompts),
            "high_priority_apps": list(settings.high_priority_apps)}


def pull_request_state(world: World, pr: PullRequest) -> Json:
    """What `/_sandbox/state/prs` shows: the state the API cannot read back (ban flags)."""
    repo = world.repos[pr.repo_id]
    return {"id": pr.id, "repo_id": pr.repo_id, "organization_id": repo.organization_id, "number": pr.number,
            "url": pr.url, "title": pr.title, "state": pr.state, "merged": pr.merged, "banned": pr.banned,
            "url_ban": pr.url_ban, "parent_run_ban": pr.parent_run_ban, "run_ids": list(pr.run_ids)}
