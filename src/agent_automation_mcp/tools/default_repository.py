"""A connection's default repository: the one `create_agent_run` and `generate_setup_commands` act on when a call
names none, as Codegen's own hosted MCP server takes it (`X-Repo-Id`), so a chat bound to one repository never looks
its id up.

Who sets it is the caller's resolver's fact (`callers.py`): the X-Repo-Id header, read by the gate with the rest of
the caller (`caller.py`), or AGENT_AUTOMATION_REPO_ID for the configured caller (stdio, `--auth env`). A call's own
repo_id wins. Before a default is sent it is looked for among the organisation's repositories, read once and
remembered as the organisation is (`OrganizationCache`): a default the organisation does not have is refused, and
nothing is started.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ..api.client import AgentAutomationClient
from ..api.errors import ConfigurationError
from ..api.transport import require_org_id
from ..caching import SharedCache, SharedStore

REPOS_CACHE_SECONDS: Final = 300.0  # as the organisation's (ORG_CACHE_SECONDS)
REPOS_CACHE_ENTRIES: Final = 10_000  # connections' defaults remembered at once
REPOS_PAGE: Final = 100
MAX_REPOS_PAGES: Final = 10  # an organisation's first 1,000 repositories are looked through for a default
FOUND_WITHIN_SECONDS: Final = 10.0  # a call waits at most this long for another replica's look
Found = tuple[bool, str | None]  # whether the organisation has it, and its full name (the service's text)


@dataclass(frozen=True, slots=True)
class DefaultRepository:
    """The repository a connection's runs start on when a call names none, and what set it (for answers to say)."""

    id: int
    set_by: str  # "X-Repo-Id", "AGENT_AUTOMATION_REPO_ID"

    def said(self) -> str:
        """`repository 202, this connection's default (X-Repo-Id)`: what a summary says of a default it used."""
        return f"repository {self.id}, this connection's default ({self.set_by})"


class RepositoryCache:
    """Whether an organisation has a repository, remembered a few minutes per token, organisation and repository.

    A cache, not state: losing it costs a read of the organisation's repositories (a page of 100 holds most); shared
    by every replica through Redis when one is configured, bounded in entries and age as the organisation's.
    """

    def __init__(self, store: SharedStore | None = None) -> None:
        self._found: SharedCache[Found] = SharedCache(store or SharedStore(), "repo", REPOS_CACHE_ENTRIES,
                                                      decode=lambda value: (bool(value[0]), value[1]))

    async def found(self, client: AgentAutomationClient, repo_id: int,
                    fetch_seconds: float = FOUND_WITHIN_SECONDS) -> Found:
        """Whether `client`'s organisation has `repo_id`, and its full name; read page by page until it is found."""
        org_id = require_org_id(client.credentials)

        async def lookup() -> tuple[Found, float]:
            for page_number in range(MAX_REPOS_PAGES):
                page = await client.list_repositories(skip=page_number * REPOS_PAGE, limit=REPOS_PAGE)
                repo = next((repo for repo in page.items if repo.id == repo_id), None)
                if repo is not None:
                    return (True, repo.full_name), REPOS_CACHE_SECONDS
                if len(page.items) < REPOS_PAGE:
                    break
            return (False, None), REPOS_CACHE_SECONDS

        key = f"{client.credentials.token_key}:{org_id}:{repo_id}"
        answer = await self._found.remembered(key, lookup, fetch_seconds=fetch_seconds)
        assert answer is not None  # `lookup` answers or raises
        return answer


def not_in_organization(tool: str, default: DefaultRepository, org_id: int | None) -> ConfigurationError:
    """The refusal of a default the organisation does not have: nothing was sent that writes."""
    where = f"organisation {org_id}" if org_id is not None else "this organisation"
    return ConfigurationError(
        f"{tool}: this connection's default repository, {default.id} (set by {default.set_by}), is not among "
        f"{where}'s repositories; nothing was started",
        hint=f"Give repo_id (list_repositories lists them), or set {default.set_by} to one of them.")
