"""Toolset `pulls`: change a pull request's state."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, Resolve
from mcp.types import CallToolResult
from pydantic import Field

from ..api.params import Id, PullRequestState
from .callers import client_for
from .confirm import Answer, Question, ask, require_confirmation
from .registry import Toolset
from .results import Output, label, ok

toolset = Toolset("pulls")


class PullRequestChange(Output):
    pr_id: int
    state: str
    url: str | None = None
    number: int | None = None
    title: str | None = None


def _edit_question(pr_id: int, state: str, ctx: Context) -> Question:
    return ask(ctx, f"Set pull request {pr_id} (the service's id) to {state.replace('_', ' ')}.")


@toolset.tool("Edit pull request", "edit_pull_request_simple", "edit_pull_request")
async def edit_pull_request(
    pr_id: Annotated[Id, Field(description="Pull request id (as in an agent run's pull_requests).")],
    state: Annotated[PullRequestState, Field(description="The state to move it to.")], ctx: Context,
    confirmed: Annotated[Answer, Resolve(_edit_question)],
    repo_id: Annotated[Id | None, Field(description="Repository id, if known.")] = None,
) -> Annotated[CallToolResult, PullRequestChange]:
    """Set a pull request's state: open, closed, draft or ready_for_review. Needs write access to the
    repository. Returns the pull request's url, number and new state."""
    require_confirmation(confirmed, "edit_pull_request")
    edit = await (await client_for(ctx)).edit_pull_request(pr_id, state, repo_id)
    out = PullRequestChange(pr_id=pr_id, state=edit.state or state, url=edit.url, number=edit.number, title=edit.title)
    return ok(out, f"Pull request {out.number or pr_id} is now {label(out.state)}; its URL and title are in the result")
