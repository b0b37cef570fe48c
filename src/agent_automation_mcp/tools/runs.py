"""Toolset `runs`: start, inspect, wait for, list and resume agent runs."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Annotated, Final

import anyio
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from ..api.errors import ApiError
from ..api.models import AgentRun, LogPage, PullRequest, github_pull_request
from ..api.params import MAX_METADATA_CHARS, STRICT_INT, AgentType, Id, Images, Metadata, Prompt, SourceType
from .callers import CALL_SECONDS, client_for, state_of
from .declarations import Toolset
from .results import (
    PAGE_ITEMS_CHARS,
    Output,
    PageLimit,
    PageSkip,
    Timestamp,
    instant,
    label,
    next_skip,
    ok,
    trim_text,
)

toolset = Toolset("runs", "Start agent runs, follow them to the end, list them and send them follow-up instructions.")

WEB_APP_URL: Final = "https://codegen.com"
MAX_WAIT_SECONDS: Final = 50
WAIT_MARGIN_SECONDS: Final = 4.0  # the last poll after the wait, so a call answers within ~54 s
POLL_INTERVALS: Final = (1.0, 1.0, 2.0, 2.0, 3.0, 5.0)

WaitSeconds = Annotated[int, Field(ge=0, le=MAX_WAIT_SECONDS,
                                   description="Wait up to this many seconds for the run to finish."),
                       STRICT_INT]
Model = Annotated[str, Field(min_length=1, max_length=200, description="Model to use; see list_models.")]
Status = Annotated[str, Field(max_length=40, pattern=r"^[A-Za-z_ -]+$")]  # the service's status is an open string
# The words people use for a status, and the service's values each stands for (observed: upper case; more may come).
_RUNNING: Final = ("ACTIVE", "RUNNING")
_FAILED: Final = ("ERROR", "FAILED")
_DONE: Final = ("COMPLETE", "COMPLETED")
_STOPPED: Final = ("STOPPED", "CANCELLED", "CANCELED")
STATUS_WORDS: Final = {
    **dict.fromkeys(("running", "active", "in progress", "ongoing"), _RUNNING),
    **dict.fromkeys(("pending", "queued", "waiting"), ("PENDING",)),
    **dict.fromkeys(("failed", "fail", "failure", "error", "errored"), _FAILED),
    **dict.fromkeys(("done", "complete", "completed", "succeeded", "success", "successful"), _DONE),
    **dict.fromkeys(("stopped", "cancelled", "canceled"), _STOPPED),
    "finished": _DONE + _FAILED + _STOPPED,
}
MAX_SCANNED_RUNS: Final = 500  # the service has no status filter: ours reads at most this many runs per call
FILTER_PAGE_SIZE: Final = 100  # in pages this large


class PullRequestRef(Output):
    pr_id: int  # the service's id: what edit_pull_request takes
    number: int | None = None  # GitHub's number, read from the url
    url: str | None = None

    @classmethod
    def of(cls, pr: PullRequest) -> PullRequestRef:
        return cls(pr_id=pr.id, number=github_pull_request(pr.url)[1] if pr.url else None, url=pr.url)


class Run(Output):
    id: int
    status: str | None = None
    is_terminal: bool
    elapsed_seconds: int | None = None  # since created_at by this server's clock, while the run is not finished
    web_url: str
    created_at: Timestamp = None
    result: str | None = None
    summary: str | None = None
    pull_requests: list[PullRequestRef] = Field(default_factory=list)

    @classmethod
    def of(cls, run: AgentRun | LogPage, max_chars: int) -> Run:
        prs = getattr(run, "github_pull_requests", None) or []
        return cls(
            id=run.id, status=run.status, is_terminal=run.is_terminal,
            web_url=run.web_url or f"{WEB_APP_URL}/agent/trace/{run.id}",
            created_at=run.created_at, elapsed_seconds=None if run.is_terminal else elapsed_since(run.created_at),
            result=trim_text(run.result, max_chars) if run.result else run.result,
            summary=trim_text(s, max_chars) if (s := getattr(run, "summary", None)) else None,
            pull_requests=[PullRequestRef.of(pr) for pr in prs],
        )

    def describe(self) -> str:
        prs = "".join(f"; pull request pr_id {pr.pr_id}" + (f" (GitHub #{pr.number})" if pr.number else "")
                      for pr in self.pull_requests)
        if self.is_terminal:
            finished = " (finished)"
        elif self.elapsed_seconds is not None:
            finished = f", going for {duration(self.elapsed_seconds)} (server clock)"
        else:
            finished = ""
        return f"Run {self.id} is {label(self.status, 'of unknown status')}{finished}{prs}; web_url in the result"


def elapsed_since(created_at: str | None) -> int | None:
    """Whole seconds from `created_at` to now on this server's clock; None if unreadable. The service reports no
    end time, so this is said only of runs still going."""
    moment = instant(created_at)
    return None if moment is None else max(0, int(time.time() - moment.timestamp()))


def duration(seconds: int) -> str:
    """`42 s`, `5 min 3 s`, `2 h 7 min`: what a person reads."""
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def wanted_statuses(asked: list[str] | None) -> set[str]:
    """The service's values for the statuses asked, in the words people use or the service's own (any case)."""
    wanted: set[str] = set()
    for word in asked or ():
        key = " ".join(word.replace("_", " ").replace("-", " ").lower().split())
        wanted.update(STATUS_WORDS.get(key, (key.upper().replace(" ", "_"),)))
    return wanted


class WaitedRun(Run):
    waited_seconds: float = 0
    note: str | None = None


class RunList(Output):
    runs: list[Run]
    total: int | None = None  # of the service's list (before a status filter)
    next_skip: int | None = None
    note: str | None = None


def _max_chars(ctx: Context) -> int:
    return state_of(ctx).settings.max_field_chars


@toolset.tool("Create agent run", "create_agent_run")
async def create_agent_run(
    prompt: Prompt, ctx: Context,
    repo_id: Annotated[Id | None, Field(description="Repository to work on; see list_repositories.")] = None,
    model: Model | None = None,
    agent_type: Annotated[AgentType | None, Field(description="Omit for the organisation's default.")] = None,
    metadata: Annotated[Metadata | None, Field(
        description=f"JSON stored with the run (≤{MAX_METADATA_CHARS} chars).")] = None,
    images: Annotated[Images | None, Field(description="Images as base64 data URIs.")] = None,
) -> Annotated[CallToolResult, Run]:
    """Start an AI coding agent on a task, optionally on one repository. The run takes minutes: follow it
    with get_agent_run (wait_seconds), read its steps with get_agent_run_logs. Each call starts a new run
    (10 per minute)."""
    client = await client_for(ctx)
    created = await client.create_agent_run(prompt, repo_id, model=model, agent_type=agent_type, metadata=metadata,
                                            images=images)
    run = Run.of(created, _max_chars(ctx))
    return ok(run, f"Started run {run.id} ({label(run.status)}); web_url in the result")


@toolset.tool("Get agent run", "get_agent_run")
async def get_agent_run(agent_run_id: Id, ctx: Context, wait_seconds: WaitSeconds = 0) -> Annotated[
        CallToolResult, WaitedRun]:
    """Get an agent run's status, result and pull requests (the service does not report a pull request's
    state, e.g. draft). elapsed_seconds: how long an unfinished run has gone on, by this server's clock.
    wait_seconds > 0 polls until the run finishes or the wait ends; is_terminal tells which."""
    client = await client_for(ctx, wait_seconds + WAIT_MARGIN_SECONDS if wait_seconds else CALL_SECONDS)
    started = time.monotonic()
    run = await client.get_agent_run(agent_run_id)
    polls = 0
    note = stopped = None
    while not run.is_terminal and (left := started + wait_seconds - time.monotonic()) > 0:
        waited = time.monotonic() - started
        await ctx.report_progress(waited, wait_seconds, f"run {agent_run_id} is {run.status}; waited {waited:.0f} s")
        await anyio.sleep(min(POLL_INTERVALS[min(polls, len(POLL_INTERVALS) - 1)], left))
        polls += 1
        try:
            run = await client.get_agent_run(agent_run_id)
        except ApiError as exc:  # answer with the last status seen rather than lose it
            note = f"stopped waiting ({exc.kind}: {exc.message}); this is the last status seen"
            stopped = f"stopped waiting ({exc.kind}); this is the last status seen"
            break
    waited = round(time.monotonic() - started, 1)
    more = "" if run.is_terminal or not wait_seconds else f" after waiting {waited:g} s; call again to wait"
    return run_result(run, _max_chars(ctx), waited_seconds=waited, note=note,
                      more=more + (f"; {stopped}" if stopped else ""))


def run_result(run: AgentRun, max_chars: int, *, waited_seconds: float = 0, note: str | None = None,
               more: str = "") -> CallToolResult:
    """What get_agent_run answers for `run`; a run followed as a task ends with the same answer."""
    out = WaitedRun(**Run.of(run, max_chars).model_dump(), waited_seconds=waited_seconds, note=note)
    return ok(out, out.describe() + more)


@toolset.tool("List agent runs", "list_agent_runs")
async def list_agent_runs(
    ctx: Context, skip: PageSkip = 0, limit: PageLimit = 20,
    user_id: Annotated[Id | None, Field(description="Only runs started by this user.")] = None,
    source_type: Annotated[SourceType | None, Field(description="Only runs started from this source.")] = None,
    statuses: Annotated[list[Status] | None, Field(max_length=10, description=(
        "Service values ACTIVE, PENDING, COMPLETE, ERROR, FAILED, STOPPED, CANCELLED, or words: running, "
        f"failed, done, finished, stopped (any case). Filtered here over ≤{MAX_SCANNED_RUNS} runs."))] = None,
) -> Annotated[CallToolResult, RunList]:
    """List the organisation's agent runs, newest first, optionally filtered. Runs do not say who started
    them."""
    client = await client_for(ctx)
    wanted = wanted_statuses(statuses)
    taken = RunsTaken(_max_chars(ctx), limit, wanted)
    position: int | None = skip
    page_size = FILTER_PAGE_SIZE if wanted else limit
    while position is not None:
        try:
            page = await client.list_agent_runs(user_id=user_id, source_type=source_type, skip=position,
                                                limit=page_size)
        except ApiError as exc:
            if position == skip:
                raise
            taken.note = f"stopped early ({exc.kind}): continue from next_skip"
            break
        taken.total = page.total
        consumed = taken.take(page.items)
        last_page = next_skip(position, len(page.items), page_size, page.total) is None
        position = None if consumed == len(page.items) and last_page else position + consumed
        if consumed < len(page.items) or taken.full or not wanted:
            break
        if position is not None and position - skip >= MAX_SCANNED_RUNS:
            taken.note = (f"read {position - skip} runs without finding {limit} in {', '.join(sorted(wanted))} "
                          "(the status filter is applied here): continue from next_skip")
            break
    if wanted and not taken.runs and taken.seen:
        have = ", ".join(f"{status} {count}" for status, count in taken.seen.most_common())
        none = f"none of the {taken.seen.total()} runs read is in {', '.join(sorted(wanted))}; they are: {have}"
        taken.note = f"{none}; {taken.note}" if taken.note else none
    out = RunList(runs=taken.runs, total=taken.total, next_skip=position, note=taken.note)
    which = f" in {', '.join(sorted(wanted))}" if wanted else ""
    return ok(out, f"{len(out.runs)} runs{which} (of {out.total if out.total is not None else 'unknown'} in total)"
                   f"{f'; next_skip={out.next_skip}' if out.next_skip is not None else ''}"
                   f"{f'; {out.note}' if out.note else ''}")


@dataclass
class RunsTaken:
    """The runs a list call returns: at most `limit`, only `wanted` statuses, within PAGE_ITEMS_CHARS."""

    max_chars: int
    limit: int
    wanted: set[str]
    runs: list[Run] = field(default_factory=list)
    size: int = 0
    total: int | None = None
    note: str | None = None
    seen: Counter[str] = field(default_factory=Counter)  # the statuses of the runs read

    @property
    def full(self) -> bool:
        return len(self.runs) >= self.limit or self.note is not None

    def take(self, items: list[AgentRun]) -> int:
        """Consume `items` in order until the count or the size budget is reached; return how many were consumed
        (a run left out by the status filter is consumed too)."""
        for consumed, item in enumerate(items):
            if self.full:
                return consumed
            self.seen[label(item.status)] += 1
            if self.wanted and (item.status or "").upper() not in self.wanted:
                continue
            run = Run.of(item, self.max_chars)
            size = len(run.model_dump_json())
            if self.runs and self.size + size > PAGE_ITEMS_CHARS:
                self.note = f"stopped at {len(self.runs)} runs ({self.size:,} characters): continue from next_skip"
                return consumed
            self.runs.append(run)
            self.size += size
        return len(items)


@toolset.tool("Resume agent run", "resume_agent_run")
async def resume_agent_run(agent_run_id: Id, prompt: Prompt, ctx: Context,
                           model: Model | None = None) -> Annotated[CallToolResult, Run]:
    """Send a follow-up instruction to an existing agent run (e.g. to fix review comments or continue after
    it finished). Follow it with get_agent_run."""
    client = await client_for(ctx)
    run = Run.of(await client.resume_agent_run(agent_run_id, prompt, model=model), _max_chars(ctx))
    return ok(run, f"Resumed: {run.describe()}")
