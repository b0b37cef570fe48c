"""Toolset `runs`: start, inspect, wait for, list and resume agent runs."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any, Final, Self

import anyio
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from ..api.client import AgentAutomationClient
from ..api.errors import ApiError
from ..api.models import AgentRun, PullRequest, github_pull_request
from ..api.params import (
    MAX_METADATA_CHARS,
    STRICT_INT,
    AgentType,
    Id,
    Images,
    Metadata,
    MetadataMatch,
    Prompt,
    SourceType,
)
from ..api.statuses import ending_reason, waits_on_person
from ..api.transport import require_org_id
from ..run_status import READ_SECONDS, now_ms
from .callers import CALL_SECONDS, client_for, offers, repository_for, state_of
from .declarations import Toolset
from .results import (
    PAGE_ITEMS_CHARS,
    Output,
    PageLimit,
    PageSkip,
    Timestamp,
    compact_json,
    counted,
    extra_fields,
    instant,
    label,
    ok,
    trim_text,
)
from .run_counts import RunCounter, RunCounts, render_counts
from .run_filters import RunFilter, SinceArg, TimeBound, wanted_statuses
from .run_scan import SCAN_PAGE_SIZE, PullRequestArg, PullRequestName, RunScan, scan_runs

if TYPE_CHECKING:
    from ..run_status import Reading, RunStatus

toolset = Toolset("runs", "Start agent runs, follow them to the end, list them and send them follow-up instructions.",
                  budget=1000)

WEB_APP_URL: Final = "https://codegen.com"
MAX_WAIT_SECONDS: Final = 50
WAIT_MARGIN_SECONDS: Final = 4.0  # the last poll after the wait, so a call answers within ~54 s
POLL_INTERVALS: Final = (1.0, 1.0, 2.0, 2.0, 3.0, 5.0)
RESUME_GAP_SECONDS: Final = 60  # a start seen this long after created_at is a resume, not the run's creation
LIST_METADATA_CHARS: Final = 200  # of a run's metadata as JSON in a list; longer is shortened there
LIST_METADATA_VALUE_CHARS: Final = 60  # of each of its values, when it is

WaitSeconds = Annotated[int, Field(ge=0, le=MAX_WAIT_SECONDS,
                                   description="Wait up to this many seconds for the run to end or pause."),
                       STRICT_INT]
Model = Annotated[str, Field(min_length=1, max_length=200, description="Model to use; see list_models.")]
Status = Annotated[str, Field(max_length=40, pattern=r"^[A-Za-z_ -]+$")]  # the service's status is an open string
PAUSED_SAYS: Final = "paused: it moves again only when resumed"
RESUME_WITH: Final = "; resume it with resume_agent_run"  # said of a paused run where the request is offered it


class PullRequestRef(Output):
    pr_id: int  # the service's id: what edit_pull_request takes
    number: int | None = None  # GitHub's number, read from the url
    url: str | None = None
    title: str | None = None
    head_branch_name: str | None = None
    created_at: Timestamp = None  # beside the runs' own: a run created after it did not open it
    # Beyond the OpenAPI: what Codegen's CLI reads when the service sends them (open, closed, draft...; merged).
    state: str | None = None
    merged: bool | None = None
    extra_fields: dict[str, Any] | None = None  # anything else the service sent on it, bounded

    @classmethod
    def of(cls, pr: PullRequest) -> PullRequestRef:
        sent = pr.model_extra or {}
        state, merged = sent.get("state"), sent.get("merged")
        return cls(pr_id=pr.id, number=github_pull_request(pr.url)[1] if pr.url else None, url=pr.url,
                   title=pr.title, head_branch_name=pr.head_branch_name, created_at=pr.created_at,
                   state=state if isinstance(state, str) else None, merged=merged if isinstance(merged, bool) else None,
                   extra_fields=extra_fields(pr, PR_FIELDS_SHOWN))

    def said(self) -> str:
        """`pull request pr_id 301 (GitHub #1, merged)`: its state only where the service sent one."""
        notes = [*([f"GitHub #{self.number}"] if self.number else []),
                 *([label(self.state)] if self.state is not None else []), *(["merged"] if self.merged else [])]
        return f"pull request pr_id {self.pr_id}" + (f" ({', '.join(notes)})" if notes else "")


PR_FIELDS_SHOWN: Final = frozenset({"state", "merged"})  # lifted out of a pull request's extra fields


class Run(Output):
    id: int
    organization_id: int | None = None
    status: str | None = None
    is_terminal: bool
    # Why it ended so (out of time, too many iterations, out of tokens), or, paused, what it waits for.
    reason: str | None = None
    # While the run is not finished, by this server's clock: since created_at (a resumed run's age, not its work
    # time), or in resume_agent_run's own result since that resume.
    elapsed_seconds: int | None = None
    # get_agent_run, while the run is not finished: its newest trace entry's time, and how long ago that was.
    last_step_at: Timestamp = None
    last_step_seconds: int | None = None
    web_url: str
    created_at: Timestamp = None
    source_type: str | None = None  # API, SETUP_COMMANDS, GITHUB_PR_REVIEW, ...: what started the run
    result: str | None = None
    summary: str | None = None
    metadata: dict[str, Any] | None = None  # as create_agent_run stored it (a list may shorten it: see its note)
    pull_requests: list[PullRequestRef] = Field(default_factory=list)
    extra_fields: dict[str, Any] | None = None  # what the service sent beyond the OpenAPI, bounded

    @classmethod
    def of(cls, run: AgentRun, max_chars: int, since: datetime | None = None, **more: Any) -> Self:
        """`since`: when this server saw the run resume, for a resume's own result (see `elapsed_phrase`); `more`:
        the fields a subclass adds, so its result is one model built once."""
        if run.is_terminal:
            elapsed = None
        elif since is not None:
            elapsed = max(0, int(time.time() - since.timestamp()))
        else:
            elapsed = elapsed_since(run.created_at)
        return cls(
            id=run.id, organization_id=run.organization_id, status=run.status, is_terminal=run.is_terminal,
            reason=PAUSED_SAYS if waits_on_person(run.status) else ending_reason(run.status),
            web_url=run.web_url or usual_web_url(run.id),
            created_at=run.created_at, elapsed_seconds=elapsed, source_type=run.source_type,
            result=trim_text(run.result, max_chars) if run.result else run.result,
            summary=trim_text(run.summary, max_chars) if run.summary else None,
            metadata=run.metadata, pull_requests=[PullRequestRef.of(pr) for pr in run.github_pull_requests or ()],
            extra_fields=extra_fields(run), **more,
        )

    def shortened(self) -> Run:
        """The run as a list shows it: metadata over LIST_METADATA_CHARS of JSON with its long values cut and, past
        the budget, its last keys left out (get_agent_run shows it whole). The same run when nothing is cut."""
        if not self.metadata or len(compact_json(self.metadata)) <= LIST_METADATA_CHARS:
            return self
        kept: dict[str, Any] = {}
        size = 2
        for key, value in self.metadata.items():
            text = value if isinstance(value, str) else compact_json(value)
            short = value if len(text) <= LIST_METADATA_VALUE_CHARS else trim_text(text, LIST_METADATA_VALUE_CHARS)
            size += len(compact_json({key: short}))
            if kept and size > LIST_METADATA_CHARS:
                break
            kept[key] = short
        return self.model_copy(update={"metadata": kept})

    def describe(self, since: datetime | None = None) -> str:
        """One line on the run; `since`: when this server saw the run start or resume (see `elapsed_phrase`)."""
        prs = "".join(f"; {pr.said()}" for pr in self.pull_requests)
        if self.is_terminal:
            finished = f" (finished{f', failed: {self.reason}' if self.reason else ''})"
        else:
            going = [*([self.reason] if self.reason else []),
                     *([phrase] if (phrase := elapsed_phrase(self.created_at, since)) is not None else []),
                     *([self.last_step()] if self.last_step_at is not None else [])]
            finished = "".join(f", {part}" for part in going)
        return f"Run {self.id} is {label(self.status, 'of unknown status')}{finished}{prs}; web_url in the result"

    def last_step(self) -> str:
        moment = instant(self.last_step_at)
        when = f" ({moment.strftime('%H:%M:%S')} UTC)" if moment is not None else ""
        ago = f"{duration(self.last_step_seconds)} ago" if self.last_step_seconds is not None else "at"
        return f"last step {ago}{when}"


def usual_web_url(run_id: int) -> str:
    """A run's page in the web app: where the service's `web_url` points, and ours when it sends none."""
    return f"{WEB_APP_URL}/agent/trace/{run_id}"


def _runs_text(page: dict[str, Any]) -> str:
    """The list as text (`run_text`, loaded at the first call that writes one: a start never needs it)."""
    from .run_text import render_runs

    return render_runs(page, usual_web_url)


def elapsed_phrase(created_at: str | None, since: datetime | None = None) -> str | None:
    """How long an unfinished run has gone on, in words that cannot mislead. From `since` when this server knows
    when the run started or resumed (a resume it made, a task it follows); otherwise worded as the time since the
    run was created, which for a finished run resumed later is its age, not how long it has worked: the service
    reports no resume time. None when neither instant is known."""
    created = instant(created_at)
    if since is not None:
        went = duration(max(0, int(time.time() - since.timestamp())))
        if created is None or since.timestamp() - created.timestamp() > RESUME_GAP_SECONDS:
            return f"resumed {went} ago"
        return f"going for {went}"
    age = elapsed_since(created_at)
    return None if age is None else f"created {duration(age)} ago (server clock)"


def elapsed_since(created_at: str | None) -> int | None:
    """Whole seconds from `created_at` to now on this server's clock; None if unreadable. The service reports no
    end time, so this is said only of runs still going."""
    moment = instant(created_at)
    return None if moment is None else max(0, int(time.time() - moment.timestamp()))


def duration(seconds: int) -> str:
    """`42 s`, `5 min 3 s`, `2 h 7 min`, `520 d 21 h`: what a person reads."""
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    if seconds < 86_400:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 86_400} d {seconds % 86_400 // 3600} h"


class WaitedRun(Run):
    waited_seconds: float = 0
    note: str | None = None


class RunList(Output):
    runs: list[Run]  # none with counts=true
    total: int | None = None  # of the service's list (before a filter of ours)
    next_skip: int | None = None
    note: str | None = None
    since: str | None = None  # the time bound asked, as an instant in UTC
    counts: RunCounts | None = None  # counts=true: the runs counted instead of listed


def _max_chars(ctx: Context) -> int:
    return state_of(ctx).settings.max_field_chars


def _statuses(ctx: Context) -> RunStatus:
    statuses = state_of(ctx).statuses
    assert statuses is not None  # the server's lifespan gives every call the one reader
    return statuses


async def _remembered(ctx: Context, client: AgentAutomationClient, run: AgentRun, sent_ms: int) -> None:
    """A start's or resume's answer, as the newest reading of the run for whoever follows it (`RunStatus`)."""
    await _statuses(ctx).remember(client, require_org_id(client.credentials), run, sent_ms)


@toolset.tool("Create agent run", "create_agent_run", run_field="id", viewed=True)
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
    (10 per minute; the service does not report the plan's run quota)."""
    client = await (await client_for(ctx)).in_organization()
    repo_id, default = await repository_for(ctx, client, repo_id, "create_agent_run")
    sent = now_ms()
    created = await client.create_agent_run(prompt, repo_id, model=model, agent_type=agent_type, metadata=metadata,
                                            images=images)
    await _remembered(ctx, client, created, sent)
    run = Run.of(created, _max_chars(ctx))
    on = f" on {default.said()}" if default is not None else ""
    return ok(run, f"Started run {run.id} ({label(run.status)}){on}; web_url in the result")


@toolset.tool("Get agent run", "get_agent_run", "list_agent_runs", "get_agent_run_logs", viewed=True)
async def get_agent_run(agent_run_id: Id, ctx: Context, wait_seconds: WaitSeconds = 0) -> Annotated[
        CallToolResult, WaitedRun]:
    """Get an agent run's status, result, metadata and pull requests. The service does not report a pull
    request's state (draft, merged) unless sent, nor who started a run, its prompt, images, model, agent type,
    repository (see its pull requests' URLs), cost, resume or end time. elapsed_seconds: an unfinished run's age by
    this server's clock."""
    budget = wait_seconds + WAIT_MARGIN_SECONDS if wait_seconds else CALL_SECONDS
    client = await (await client_for(ctx, budget)).in_organization()
    started, statuses = time.monotonic(), _statuses(ctx)

    async def read() -> Reading:
        seconds = max(1.0, min(READ_SECONDS, started + budget - time.monotonic()))
        return await statuses.read(client, require_org_id(client.credentials), agent_run_id, seconds=seconds)

    # The reader met an error (the run is gone, pacing, the service): this call's own read says which.
    run = (await read()).run or await client.get_agent_run(agent_run_id)
    run, stopped = await _waited(ctx, read, run, wait_seconds, started)
    step, unread = await _last_step(client, run)
    waited = round(time.monotonic() - started, 1)
    going = not run.is_terminal and not waits_on_person(run.status)
    more = f" after waiting {waited:g} s; call again to wait" if going and wait_seconds else ""
    if waits_on_person(run.status) and offers(ctx, "resume_agent_run"):
        more = RESUME_WITH + more
    notes = [note for note in (stopped, unread) if note]
    return run_result(run, _max_chars(ctx), waited_seconds=waited, note="; ".join(notes) or None,
                      more=more + "".join(f"; {note}" for note in notes), **step)


async def _waited(ctx: Context, read: Callable[[], Awaitable[Reading]], run: AgentRun, wait_seconds: int,
                  started: float) -> tuple[AgentRun, str | None]:
    """`run` followed until it ends, pauses (nothing moves until someone resumes it) or `wait_seconds` pass; and why
    the wait stopped early, if a read failed (the last status seen is the answer)."""
    polls = 0
    while not run.is_terminal and not waits_on_person(run.status) and (
            left := started + wait_seconds - time.monotonic()) > 0:
        waited = time.monotonic() - started
        await ctx.report_progress(waited, wait_seconds, f"run {run.id} is {run.status}; waited {waited:.0f} s")
        await anyio.sleep(min(POLL_INTERVALS[min(polls, len(POLL_INTERVALS) - 1)], left))
        polls += 1
        reading = await read()
        if reading.run is None:
            return run, f"stopped waiting ({reading.problem}); this is the last status seen"
        run = reading.run
    return run, None


async def _last_step(client: AgentAutomationClient, run: AgentRun) -> tuple[dict[str, Any], str | None]:
    """For a run not finished, when its newest trace entry was (one read): whether it still does anything. Nothing
    for a finished run; why not, when the read failed."""
    if run.is_terminal:
        return {}, None
    try:
        page = await client.get_agent_run_logs(run.id, limit=1, reverse=True)
    except ApiError as exc:
        return {}, f"its last step was not read ({exc.kind})"
    newest = page.logs[0].created_at if page.logs else None
    moment = instant(newest)
    return {"last_step_at": newest,
            "last_step_seconds": None if moment is None else max(0, int(time.time() - moment.timestamp()))}, None


def run_result(run: AgentRun, max_chars: int, *, waited_seconds: float = 0, note: str | None = None,
               more: str = "", **step: Any) -> CallToolResult:
    """What get_agent_run answers for `run`; a run followed as a task ends with the same answer. `step`: when the
    newest trace entry of a run still going was (`_last_step`)."""
    out = WaitedRun.of(run, max_chars, waited_seconds=waited_seconds, note=note, **step)
    return ok(out, out.describe() + more)


@toolset.tool("List agent runs", "list_agent_runs", viewed=True)
async def list_agent_runs(
    ctx: Context, skip: PageSkip = 0, limit: PageLimit = 20,
    user_id: Annotated[Id | None, Field(description="Started by this user.")] = None,
    source_type: Annotated[SourceType | None, Field(description="Started from this source.")] = None,
    statuses: Annotated[list[Status] | None, Field(max_length=10, description=(
        "Words (running, paused, failed: every failure, done, stopped, finished) or values (ACTIVE, PAUSED, "
        "COMPLETE, ERROR, TIMEOUT, MAX_ITERATIONS_REACHED, OUT_OF_TOKENS, STOPPED...), any case."))] = None,
    pull_request: Annotated[PullRequestArg | None, Field(description=(
        "Only runs attached to it (URL, owner/repo#7 or pr_id); which one opened it is not reported."))] = None,
    metadata: Annotated[MetadataMatch | None, Field(description=(
        "Runs whose metadata holds these keys and values: 14 = \"14\", any case; a list holds an item."))] = None,
    since: Annotated[SinceArg | None, Field(description=(
        "Runs created since: an ISO 8601 time with the user's UTC offset, or hours back (24h)."))] = None,
    counts: Annotated[bool, Field(description=(
        "Counts by status, source and repository, and failed runs' ids, instead of runs."))] = False,
) -> Annotated[CallToolResult, RunList]:
    """List or count the organisation's agent runs, newest first. Filters other than user_id and source_type apply
    here, over ≤500 runs a call (note says how far)."""
    client = await (await client_for(ctx)).in_organization()
    chosen = RunFilter(wanted_statuses(statuses), pull_request, metadata)
    taker: RunsTaken | RunCounter = RunCounter(chosen) if counts else RunsTaken(_max_chars(ctx), limit, chosen)
    filtering = counts or since is not None or chosen != RunFilter()
    scan = await scan_runs(client, taker, skip=skip, page_size=SCAN_PAGE_SIZE if filtering else limit,
                           filtering=filtering, user_id=user_id, source_type=source_type,
                           before=since.before if since is not None else None,
                           newest=None if user_id or source_type else partial(
                               _statuses(ctx).remember_page, client, require_org_id(client.credentials)))
    notes = [*([f"stopped early ({scan.failed.kind}): continue from next_skip"] if scan.failed is not None else []),
             *([scan.how_far()] if filtering else [])]
    which = " and ".join(part for part in (since.said() if since else "", chosen.said()) if part)
    if isinstance(taker, RunCounter):
        return _counted(taker, scan, since, which, notes)
    notes = taker.notes(chosen, notes)
    out = RunList(runs=taker.runs, total=scan.total, next_skip=scan.position, note="; ".join(notes) or None,
                  since=since.utc if since else None)
    return ok(out, f"{counted(len(out.runs), 'run')}{f' {which}' if which else ''}{_of_total(out)}", render=_runs_text)


def _of_total(out: RunList) -> str:
    """` (of 342 in total); next_skip=20; <note>`: what a list's summary says after its count."""
    return (f" (of {out.total if out.total is not None else 'unknown'} in total)"
            f"{f'; next_skip={out.next_skip}' if out.next_skip is not None else ''}"
            f"{f'; {out.note}' if out.note else ''}")


def _counted(counter: RunCounter, scan: RunScan, bound: TimeBound | None, which: str,
             notes: list[str]) -> CallToolResult:
    """The answer of `counts=true`: the counts, and how far the runs were read."""
    out = RunList(runs=[], total=scan.total, next_skip=scan.position, note="; ".join(notes) or None,
                  since=bound.utc if bound else None, counts=counter.counts())
    summary = f"Counted {counted(counter.runs, 'run')}{f' {which}' if which else ''}{_of_total(out)}"
    return ok(out, summary, render=render_counts)


def opened_by(name: PullRequestName, pr: PullRequest | None, runs: list[Run]) -> str:
    """What the data says of which run opened a pull request, which the service does not report: a run created after
    the pull request did not."""
    made = instant(pr.created_at) if pr is not None else None
    if made is None:
        return f"the service does not say which run opened pull request {name}, nor when it was created"
    before = [run.id for run in runs if (created := instant(run.created_at)) is not None and created <= made]
    which = (f"of these, only run{'s' if len(before) > 1 else ''} {', '.join(map(str, before))} "
             f"{'were' if len(before) > 1 else 'was'} created at or before it" if before
             else "none of these was created at or before it")
    return (f"the service does not say which run opened pull request {name}: it was created at {made.isoformat()}; "
            f"{which}")


@dataclass
class RunsTaken:
    """The runs a list call returns: at most `limit` of those `filter` admits, within PAGE_ITEMS_CHARS."""

    max_chars: int
    limit: int
    filter: RunFilter
    runs: list[Run] = field(default_factory=list)
    size: int = 0
    note: str | None = None
    seen: Counter[str] = field(default_factory=Counter)  # the statuses of the runs read
    pull_request_found: PullRequest | None = None  # as the newest run attached to it shows it
    shortened: list[int] = field(default_factory=list)  # runs whose metadata the list shortened

    @property
    def full(self) -> bool:
        return len(self.runs) >= self.limit or self.note is not None

    def take(self, items: list[AgentRun]) -> int:
        """Consume `items` in order until the count or the size budget is reached; return how many were consumed
        (a run left out by the filter is consumed too)."""
        for consumed, item in enumerate(items):
            if self.full:
                return consumed
            self.seen[label(item.status)] += 1
            if not self.filter.admits(item):
                continue
            if self.filter.pull_request is not None:
                self.pull_request_found = self.pull_request_found or self.filter.pull_request.found_in(item)
            whole = Run.of(item, self.max_chars)
            run = whole.shortened()
            size = len(run.model_dump_json())
            if self.runs and self.size + size > PAGE_ITEMS_CHARS:
                self.note = (f"stopped at {counted(len(self.runs), 'run')} ({self.size:,} characters): continue from "
                             "next_skip")
                return consumed
            self.runs.append(run)
            self.size += size
            if run is not whole:
                self.shortened.append(run.id)
        return len(items)

    def notes(self, chosen: RunFilter, read: list[str]) -> list[str]:
        """What the list says of the runs it took, around what it says of its reading (`read`)."""
        notes = [*([self.note] if self.note else []), *read]
        if chosen.statuses and not self.runs and self.seen:
            have = ", ".join(f"{status} {count}" for status, count in self.seen.most_common())
            notes.insert(0, f"none of the {counted(self.seen.total(), 'run')} read is in "
                            f"{', '.join(sorted(chosen.statuses))}; they are: {have}")
        if chosen.pull_request is not None and self.runs:
            notes.append(opened_by(chosen.pull_request, self.pull_request_found, self.runs))
        if self.shortened:
            notes.append(f"metadata shortened in {counted(len(self.shortened), 'run')} "
                         f"({', '.join(map(str, self.shortened))}): get_agent_run shows it whole")
        return notes


@toolset.tool("Resume agent run", "resume_agent_run", run_field="id", viewed=True)
async def resume_agent_run(agent_run_id: Id, prompt: Prompt, ctx: Context,
                           model: Model | None = None) -> Annotated[CallToolResult, Run]:
    """Send a follow-up instruction to an existing agent run (e.g. to fix review comments or continue after
    it finished). Follow it with get_agent_run."""
    client = await (await client_for(ctx)).in_organization()
    resumed_at, sent = datetime.now(UTC), now_ms()
    resumed = await client.resume_agent_run(agent_run_id, prompt, model=model)
    await _remembered(ctx, client, resumed, sent)
    run = Run.of(resumed, _max_chars(ctx), since=resumed_at)
    return ok(run, f"Resumed: {run.describe(since=resumed_at)}")
