"""Reading the organisation's runs page by page for what the service cannot filter on (a status, a pull request, a
time), within a bound per call, and saying how far the reading went; and a pull request as people name it.

The service lists no pull requests and filters runs by neither: the only way from a pull request to its runs (or
to its pr_id) is through the runs, newest first.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from itertools import takewhile
from typing import Annotated, Any, Final, Protocol

from pydantic import PlainValidator, WithJsonSchema

from ..api.client import AgentAutomationClient
from ..api.errors import ApiError
from ..api.models import AgentRun, PullRequest, github_pull_request
from ..api.params import SourceType
from .results import counted, next_skip

MAX_SCANNED_RUNS: Final = 500  # runs read per call at most, when this server filters
SCAN_PAGE_SIZE: Final = 100  # in pages this large
MAX_PULL_REQUEST_CHARS: Final = 300  # of a pull request's name as given: a URL, owner/repo#7 or a pr_id
_SHORT_FORM = re.compile(r"^([\w.-]+/[\w.-]+)#(\d+)$")
_PR_ID = re.compile(r"^\d{1,12}$")
# Hears of the newest runs when a list reads them (its runs, the service's total, when it was sent: Unix ms).
NewestRuns = Callable[[list[AgentRun], int | None, int], Awaitable[None]]
# Whether a run was created before the time a scan reads back to: newest first, the scan stops at the first that was.
BeforeBound = Callable[[AgentRun], bool]


@dataclass(frozen=True, slots=True)
class PullRequestName:
    """A pull request as a person names it: the service's pr_id, or a repository and GitHub's number."""

    pr_id: int | None = None
    repository: str | None = None  # owner/repo, lower case
    number: int | None = None

    def __str__(self) -> str:
        return f"pr_id {self.pr_id}" if self.pr_id is not None else f"{self.repository}#{self.number}"

    def found_in(self, run: AgentRun) -> PullRequest | None:
        """The run's pull request that this names, if the run made it."""
        for pr in run.github_pull_requests or ():
            if self.pr_id is not None:
                if pr.id == self.pr_id:
                    return pr
                continue
            repository, number = github_pull_request(pr.url) if pr.url else (None, None)
            if repository is not None and (repository.lower(), number) == (self.repository, self.number):
                return pr
        return None


def pull_request_name(given: Any) -> PullRequestName:
    """`https://github.com/owner/repo/pull/7`, `owner/repo#7` or a pr_id (`301`, as a number or text)."""
    text = str(given).strip() if isinstance(given, int | str) and not isinstance(given, bool) else ""
    if len(text) > MAX_PULL_REQUEST_CHARS:  # the schema's maxLength: a plain validator does not check it
        raise ValueError(f"a pull request's name is at most {MAX_PULL_REQUEST_CHARS} characters")
    if _PR_ID.match(text) and int(text) > 0:
        return PullRequestName(pr_id=int(text))
    short = _SHORT_FORM.match(text)
    repository, number = (short.group(1), int(short.group(2))) if short else github_pull_request(text)
    if repository is None or number is None:
        raise ValueError(f"{text[:80]!r} names no pull request: give its URL (https://github.com/owner/repo/pull/7), "
                         "owner/repo#7 or its pr_id")
    return PullRequestName(repository=repository.lower(), number=number)


# An argument naming a pull request: a string in the schema, read into a PullRequestName (a pr_id may come as a number).
PullRequestArg = Annotated[PullRequestName, PlainValidator(pull_request_name),
                           WithJsonSchema({"type": "string", "maxLength": MAX_PULL_REQUEST_CHARS})]


class RunTaker(Protocol):
    """What a scan gives each page to: it keeps the runs it wants until it has enough."""

    @property
    def full(self) -> bool: ...

    def take(self, items: list[AgentRun]) -> int:
        """How many of `items` were consumed, in order (fewer than all: it is full)."""
        ...


@dataclass
class RunScan:
    """Where a scan ended: `position` is the next_skip to go on from (None once the oldest run was read)."""

    skip: int
    position: int | None
    pages: int = 0
    read: int = 0
    total: int | None = None
    failed: ApiError | None = None  # a later page failed: the scan answers with what it read
    timed: bool = False  # it had a time bound

    def how_far(self) -> str:
        """The search in words, for a note or a message."""
        end = "back to the time bound" if self.timed else "to the oldest run"
        ended = end if self.position is None else f"not {end}: continue from next_skip"
        return f"read {counted(self.read, 'run')} in {counted(self.pages, 'page')} from skip {self.skip}, {ended}"


async def scan_runs(client: AgentAutomationClient, taker: RunTaker, *, skip: int,
                    page_size: int, filtering: bool, user_id: int | None = None,
                    source_type: SourceType | None = None, newest: NewestRuns | None = None,
                    before: BeforeBound | None = None) -> RunScan:
    """Read runs from `skip`, newest first, giving each page to `taker`. Without `filtering`, one page; with it, pages
    on until the taker is full, the oldest run is read, the first run `before` the time bound, or MAX_SCANNED_RUNS.
    A failure on the first page is raised; on a later one, kept in `failed`. `newest` hears of the page from skip 0
    (its runs, total, when it was sent)."""
    scan = RunScan(skip=skip, position=skip, timed=before is not None)
    while scan.position is not None:
        position = scan.position
        sent = int(time.time() * 1000)
        try:
            page = await client.list_agent_runs(user_id=user_id, source_type=source_type, skip=position,
                                                limit=page_size)
        except ApiError as exc:
            if position == skip:
                raise
            scan.failed = exc
            break
        if position == 0 and newest is not None:
            await newest(page.items, page.total, sent)
        scan.pages += 1
        scan.total = page.total
        items = page.items if before is None else list(takewhile(lambda run: not before(run), page.items))
        consumed = taker.take(items)
        scan.read += consumed
        bounded = consumed == len(items) < len(page.items)  # the first run before the bound: none older is wanted
        last_page = bounded or next_skip(position, len(page.items), page_size, page.total) is None
        scan.position = None if consumed == len(items) and last_page else position + consumed
        if consumed < len(items) or taker.full or not filtering:
            break
        if scan.position is not None and scan.position - skip >= MAX_SCANNED_RUNS:
            break
    return scan
