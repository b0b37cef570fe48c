"""Toolset `pulls`: change a pull request's state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Final, get_args

from mcp.server.mcpserver import Context, Resolve
from mcp.types import CallToolResult
from pydantic import BeforeValidator, Field

from ..api.client import AgentAutomationClient
from ..api.errors import InvalidRequestError, NotFoundError
from ..api.models import AgentRun, github_pull_request
from ..api.params import Id, PullRequestState
from .callers import client_for
from .confirm import Answer, Question, ask, require_confirmation
from .declarations import Toolset
from .missing_actions import PULL_REQUEST, refuse_missing
from .results import Output, label, ok
from .run_scan import SCAN_PAGE_SIZE, PullRequestArg, PullRequestName, scan_runs

toolset = Toolset("pulls", "Open, close, draft or ready a pull request an agent run made.", budget=235)

MAX_REPOSITORIES_SEARCHED: Final = 500  # a repo_id's name is looked up among the organisation's first repositories
PAGE_SIZE: Final = 100
PR_ID_HINT: Final = ("pr_id is the service's own id (pr_id in pull_requests of get_agent_run or list_agent_runs), not "
                     "the GitHub number; or pass pr_url, or number with repo_id.")


class PullRequestChange(Output):
    pr_id: int
    state: str | None  # as the service reports it; null when its answer does not say
    url: str | None = None
    number: int | None = None
    title: str | None = None


def _edit_question(state: str, ctx: Context, pr_id: int | None = None, pr_url: PullRequestName | None = None,
                   number: int | None = None, repo_id: int | None = None) -> Question:
    which = (f"pull request {pr_id} (the service's id)" if pr_id is not None else f"pull request {pr_url}"
             if pr_url is not None else f"pull request #{number} of repository {repo_id}")
    return ask(ctx, f"Set {which} to {state.replace('_', ' ')}.")


@toolset.tool("Edit pull request", "list_agent_runs", "list_repositories", "edit_pull_request_simple",
              "edit_pull_request")
async def edit_pull_request(
    state: Annotated[PullRequestState, Field(description="The state to move it to."),
                     BeforeValidator(refuse_missing(PULL_REQUEST, get_args(PullRequestState)))], ctx: Context,
    confirmed: Annotated[Answer, Resolve(_edit_question)],
    pr_id: Annotated[Id | None, Field(description="The service's id, not the GitHub number.")] = None,
    pr_url: Annotated[PullRequestArg | None, Field(
        description="Instead of pr_id: its GitHub URL or owner/repo#number.")] = None,
    number: Annotated[Id | None, Field(description="Instead of pr_id: GitHub's number, with repo_id.")] = None,
    repo_id: Annotated[Id | None, Field(description="Repository id (list_repositories).")] = None,
) -> Annotated[CallToolResult, PullRequestChange]:
    """Set a pull request's state. Name it by pr_id (from get_agent_run or list_agent_runs), pr_url, or
    number with repo_id (these two find pull requests agent runs made). Only on the user's explicit
    request; needs write access to the repository."""
    if sum(value is not None for value in (pr_id, pr_url, number)) != 1 or (number is not None and repo_id is None):
        raise InvalidRequestError("edit_pull_request: give one of pr_id, pr_url (or owner/repo#7), or number with "
                                  "repo_id", operation="edit_pull_request")
    require_confirmation(confirmed, "edit_pull_request")
    client = await client_for(ctx)
    if pr_id is None:
        if pr_url is None:
            assert number is not None and repo_id is not None
            pr_url = PullRequestName(repository=(await _repository_name(client, repo_id)).lower(), number=number)
        pr_id = pr_url.pr_id or await _find_pr_id(client, pr_url)
    try:
        edit = await client.edit_pull_request(pr_id, state, repo_id)
    except NotFoundError as exc:
        exc.hint = PR_ID_HINT  # the generic hint names no tool
        raise
    number = edit.number or (github_pull_request(edit.url)[1] if edit.url else None)
    out = PullRequestChange(pr_id=pr_id, state=edit.state, url=edit.url, number=number, title=edit.title)
    github = f" (GitHub #{number})" if number else ""
    now = (f"is now {label(out.state)} (the service does not say what it was)" if out.state else
           f"was accepted for {state}; the service's answer does not say its state now, nor before")
    return ok(out, f"Pull request pr_id {pr_id}{github} {now}; its URL and title are in the result")


async def _repository_name(client: AgentAutomationClient, repo_id: int) -> str:
    """A repository's owner/name, from the organisation's repository list (the service has no single read)."""
    searched = 0
    while searched < MAX_REPOSITORIES_SEARCHED:
        page = await client.list_repositories(skip=searched, limit=PAGE_SIZE)
        for repo in page.items:
            if repo.id == repo_id and repo.full_name:
                return repo.full_name
        searched += len(page.items)
        if len(page.items) < PAGE_SIZE or (page.total is not None and searched >= page.total):
            break
    raise NotFoundError(f"edit_pull_request: repository {repo_id} is not among the organisation's {searched}",
                        operation="edit_pull_request", hint="Call list_repositories for the ids.")


@dataclass
class _FirstPullRequest:
    """Takes runs until one made the pull request: its pr_id."""

    wanted: PullRequestName
    pr_id: int | None = None

    @property
    def full(self) -> bool:
        return self.pr_id is not None

    def take(self, items: list[AgentRun]) -> int:
        for consumed, run in enumerate(items):
            if (pr := self.wanted.found_in(run)) is not None:
                self.pr_id = pr.id
                return consumed + 1
        return len(items)


async def _find_pr_id(client: AgentAutomationClient, wanted: PullRequestName) -> int:
    """The service's id of a GitHub pull request, from the runs that made it (the service lists no pull requests)."""
    found = _FirstPullRequest(wanted)
    scan = await scan_runs(client, found, skip=0, page_size=SCAN_PAGE_SIZE, filtering=True)
    if found.pr_id is not None:
        return found.pr_id
    if scan.failed is not None:
        raise scan.failed
    raise NotFoundError(
        f"edit_pull_request: none of the agent runs read made the pull request {wanted} ({scan.how_far()})",
        operation="edit_pull_request",
        hint="Only pull requests made by agent runs can be found this way; pass its pr_id if you have it.")
