"""Toolset `settings`: a repository's check-suite settings (how failed CI checks are retried and fixed)."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from ..api.models import CheckSuiteSettings
from ..api.params import CheckLists, CheckPrompts, CheckRetryCount, CheckRetryCounts, Id
from .callers import client_for
from .declarations import Toolset
from .results import Output, ok

toolset = Toolset("settings", "Read and change a repository's check-suite settings.")

RepoId = Annotated[Id, Field(description="Repository id; see list_repositories.")]


class SettingsChange(Output):
    repo_id: int
    changed: list[str]  # settings given that differed from what the service had, and its answer shows as given
    already: list[str]  # settings given that were already so: left as they were
    unconfirmed: list[str] = Field(default_factory=list)  # sent to change, but its answer does not show them
    not_applied: list[str] = Field(default_factory=list)  # sent to change, but its answer shows another value
    response: dict[str, Any]


@toolset.tool("Get check-suite settings", "get_check_suite_settings")
async def get_check_suite_settings(repo_id: RepoId, ctx: Context) -> Annotated[CallToolResult, CheckSuiteSettings]:
    """Read how a repository's failed CI checks are handled: retries, ignored checks, prompts per check,
    apps handled first."""
    out = await (await client_for(ctx)).get_check_suite_settings(repo_id)
    return ok(out, f"Repository {repo_id}: retry failed checks {out.check_retry_count} times, "
                   f"{len(out.ignored_checks)} ignored checks")


@toolset.tool("Update check-suite settings", "get_check_suite_settings", "update_check_suite_settings")
async def update_check_suite_settings(
    repo_id: RepoId, ctx: Context,
    check_retry_count: CheckRetryCount | None = None,
    ignored_checks: Annotated[CheckLists | None, Field(description="Check names to ignore (replaces them).")] = None,
    check_retry_counts: Annotated[CheckRetryCounts | None, Field(description="Retry count per check name.")] = None,
    custom_prompts: Annotated[CheckPrompts | None, Field(description="Fix instructions per check name.")] = None,
    high_priority_apps: Annotated[CheckLists | None, Field(
        description="Apps whose check failures are handled immediately.")] = None,
) -> Annotated[CallToolResult, SettingsChange]:
    """Change a repository's check-suite settings. Only the settings given change; give at least one.
    The result says which changed and which were already so."""
    given = {name: value for name, value in {
        "check_retry_count": check_retry_count, "ignored_checks": ignored_checks,
        "check_retry_counts": check_retry_counts, "custom_prompts": custom_prompts,
        "high_priority_apps": high_priority_apps}.items() if value is not None}
    client = await client_for(ctx)
    before = (await client.get_check_suite_settings(repo_id)).model_dump() if given else {}
    response = await client.update_check_suite_settings(repo_id, **given)
    return settings_result(repo_id, given, before, response)


def settings_result(repo_id: int, given: dict[str, Any], before: dict[str, Any],
                    response: dict[str, Any]) -> CallToolResult:
    """What an update did, from the settings before it and the service's answer: changed (and shown so), already
    so, sent but not shown (the answer is untyped), or shown with another value."""
    changed = [name for name, value in given.items() if before.get(name) != value]
    already = [name for name in given if name not in changed]
    unconfirmed = [name for name in changed if name not in response]
    not_applied = [name for name in changed if name in response and response[name] != given[name]]
    out = SettingsChange(repo_id=repo_id, changed=[n for n in changed if n not in unconfirmed + not_applied],
                         already=already, unconfirmed=unconfirmed, not_applied=not_applied, response=response)
    parts = [f"changed {', '.join(out.changed)}" if out.changed else "changed nothing",
             *([f"already so (left as they were): {', '.join(already)}"] if already else []),
             *([f"sent {', '.join(unconfirmed)}, accepted; the answer does not show the new values"]
               if unconfirmed else []),
             *([f"the service's answer shows other values for {', '.join(not_applied)}"] if not_applied else [])]
    return ok(out, f"Repository {repo_id}: {'; '.join(parts)}")
