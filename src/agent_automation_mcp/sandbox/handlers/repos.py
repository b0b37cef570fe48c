"""Pull-request state and per-repository check-suite settings."""

from __future__ import annotations

from typing import Any

from .. import views
from ..call import Call, Endpoint
from ..entities import AVAILABLE_CHECKS, Repository
from ..errors import Forbidden, NotFound
from ..inputs import CheckSuiteSettingsRequest, EditPRInput, RepoQuery


def edit_pull_request_simple(call: Call) -> Any:
    return _edit(call, repo_id=None)


def edit_pull_request(call: Call) -> Any:
    return _edit(call, repo_id=call.path["repo_id"])


def _edit(call: Call, repo_id: int | None) -> Any:
    pr_id = call.path["pr_id"]
    pr = call.world.pr_in_org(call.org.id, pr_id)
    if pr is None or (repo_id is not None and pr.repo_id != repo_id):
        raise NotFound(f"Pull request {pr_id} not found")
    repo = call.world.repos[pr.repo_id]
    if call.user.id not in repo.writer_ids:
        raise Forbidden(f"You do not have write permission on the repository {repo.full_name}")
    body: EditPRInput = call.body
    if pr.merged:
        return {"success": False, "url": pr.url, "number": pr.number, "title": pr.title, "state": "merged",
                "error": f"Pull request #{pr.number} is merged and cannot be changed to {body.state}"}
    pr.state = body.state
    return {"success": True, "url": pr.url, "number": pr.number, "title": pr.title, "state": pr.state, "error": None}


def _repo(call: Call) -> Repository:
    repo_id = call.query.repo_id
    repo = call.world.repo_in_org(call.org.id, repo_id)
    if repo is None:
        raise NotFound(f"Repository {repo_id} not found")
    return repo


def get_check_suite_settings(call: Call) -> Any:
    return {**views.check_suite_settings(_repo(call).check_suite), "available_check_suite_names": [*AVAILABLE_CHECKS]}


def update_check_suite_settings(call: Call) -> Any:
    """A partial update: only the fields sent (and not null) change."""
    repo = _repo(call)
    body: CheckSuiteSettingsRequest = call.body
    for name in body.model_fields_set:
        value = getattr(body, name)
        if value is not None:
            setattr(repo.check_suite, name, value)
    return {**views.check_suite_settings(repo.check_suite), "available_check_suite_names": [*AVAILABLE_CHECKS]}


ENDPOINTS = {
    "edit_pull_request_simple": Endpoint(edit_pull_request_simple, body=EditPRInput),
    "edit_pull_request": Endpoint(edit_pull_request, body=EditPRInput),
    "get_check_suite_settings": Endpoint(get_check_suite_settings, query=RepoQuery),
    "update_check_suite_settings": Endpoint(update_check_suite_settings, query=RepoQuery,
                                            body=CheckSuiteSettingsRequest),
}
