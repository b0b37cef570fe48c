"""Toolset `runs`: start, inspect, wait for, list and resume agent runs."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Self

import anyio
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

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
from .callers import CALL_SECONDS, client_for, state_of
from .declarations import Toolset
from .results import (
    PAGE_ITEMS_CHARS,
    Output,
    PageLimit,
    PageSkip,
    Timestamp,
    compact_json,
    counted,
    instant,
    label,
    ok,
    trim_text,
)
from .run_scan import SCAN_PAGE_SIZE, PullRequestArg, PullRequestName, scan_runs

toolset = Toolset("runs", "Start agent runs, follow them to the end, list them and send them follow-up instructions.")

WEB_APP_URL: Final = "https://codegen.com"
MAX_WAIT_SECONDS: Final = 50
WAIT_MARGIN_SECONDS: Final = 4.0  # the last poll after the wait, so a call answers within ~54 s
POLL_INTERVALS: Final = (1.0, 1.0, 2.0, 2.0, 3.0, 5.0)
RESUME_GAP_SECONDS: Final = 60  # a start seen this long after created_at is a resume, not the run's creation
LIST_METADATA_CHARS: Final = 200  # of a run's metadata as JSON in a list; longer is shortened there
LIST_METADATA_VALUE_CHARS: Final = 60  # of each of its values, when it is

WaitSeconds = Annotated[int, Field(ge=0, le=MAX_WAIT_SECONDS,
                                   description="Wait up to this many seconds for the run to finish."),
                       STRICT_INT]
Model = Annotated[str, Field(min_length=1, max_length=200, description="Model to use; see list_models.")]
Status = Annotated[str, Field(max_length=40, pattern=r"^[A-Za-z_ -]+$")]  # the service's status is an open string
# The words people use for a status, and the service's values each stands for (observed: upper case; more may come).
_RUNNING: Final = ("ACTIVE", "RUNNING")
FAILED: Final = ("ERROR", "FAILED")  # FAILED and STOPPED also tell a task (`tasks`) how its run ended
_DONE: Final = ("COMPLETE", "COMPLETED")
STOPPED: Final = ("STOPPED", "CANCELLED", "CANCELED")
STATUS_WORDS: Final = {
    **dict.fromkeys(("running", "active", "in progress", "ongoing"), _RUNNING),
    **dict.fromkeys(("pending", "queued", "waiting"), ("PENDING",)),
    **dict.fromkeys(("failed", "fail", "failure", "error", "errored"), FAILED),
    **dict.fromkeys(("done", "complete", "completed", "succeeded", "success", "successful"), _DONE),
    **dict.fromkeys(("stopped", "cancelled", "canceled"), STOPPED),
    "finished": _DONE + FAILED + STOPPED,
}


class PullRequestRef(Output):
    pr_id: int  # the service's id: what edit_pull_request takes
    number: int | None = None  # GitHub's number, read from the url
    url: str | None = None
    title: str | None = None
    head_branch_name: str | None = None
    created_at: Timestamp = None  # beside the runs' own: a run created after it did not open it

    @classmethod
    def of(cls, pr: PullRequest) -> PullRequestRef:
        return cls(pr_id=pr.id, number=github_pull_request(pr.url)[1] if pr.url else None, url=pr.url,
                   title=pr.title, head_branch_name=pr.head_branch_name, created_at=pr.created_at)


class Run(Output):
    id: int
    organization_id: int | None = None
    status: str | None = None
    is_terminal: bool
    # While the run is not finished, by this server's clock: since created_at (a resumed run's age, not its work
    # time), or in resume_agent_run's own result since that resume.
    elapsed_seconds: int | None = None
    web_url: str
    created_at: Timestamp = None
    source_type: str | None = None  # API, SETUP_COMMANDS, GITHUB_PR_REVIEW, ...: what started the run
    result: str | None = None
    summary: str | None = None
    metadata: dict[str, Any] | None = None  # as create_agent_run stored it (a list may shorten it: see its note)
    pull_requests: list[PullRequestRef] = Field(default_factory=list)

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
            web_url=run.web_url or usual_web_url(run.id),
            created_at=run.created_at, elapsed_seconds=elapsed, source_type=run.source_type,
            result=trim_text(run.result, max_chars) if run.result else run.result,
            summary=trim_text(run.summary, max_chars) if run.summary else None,
            metadata=run.metadata, pull_requests=[PullRequestRef.of(pr) for pr in run.github_pull_requests or ()],
            **more,
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
        prs = "".join(f"; pull request pr_id {pr.pr_id}" + (f" (GitHub #{pr.number})" if pr.number else "")
                      for pr in self.pull_requests)
        if self.is_terminal:
            finished = " (finished)"
        elif (phrase := elapsed_phrase(self.created_at, since)) is not None:
            finished = f", {phrase}"
        else:
            finished = ""
        return f"Run {self.id} is {label(self.status, 'of unknown status')}{finished}{prs}; web_url in the result"


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
    total: int | None = None  # of the service's list (before a filter of ours)
    next_skip: int | None = None
    note: str | None = None


def _max_chars(ctx: Context) -> int:
    return state_of(ctx).settings.max_field_chars


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
    client = await client_for(ctx)
    created = await client.create_agent_run(prompt, repo_id, model=model, agent_type=agent_type, metadata=metadata,
                                            images=images)
    run = Run.of(created, _max_chars(ctx))
    return ok(run, f"Started run {run.id} ({label(run.status)}); web_url in the result")


@toolset.tool("Get agent run", "get_agent_run", viewed=True)
async def get_agent_run(agent_run_id: Id, ctx: Context, wait_seconds: WaitSeconds = 0) -> Annotated[
        CallToolResult, WaitedRun]:
    """Get an agent run's status, result, metadata and pull requests. The service does not report a pull
    request's state (e.g. draft or merged), nor who started a run, its prompt, images, model, agent type,
    repository (see its pull requests' URLs), cost, resume or end time. elapsed_seconds: an unfinished run's
    age by this server's clock. wait_seconds > 0 polls until it ends; is_terminal says if it did."""
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
    out = WaitedRun.of(run, max_chars, waited_seconds=waited_seconds, note=note)
    return ok(out, out.describe() + more)


@toolset.tool("List agent runs", "list_agent_runs", viewed=True)
async def list_agent_runs(
    ctx: Context, skip: PageSkip = 0, limit: PageLimit = 20,
    user_id: Annotated[Id | None, Field(description="Only runs started by this user.")] = None,
    source_type: Annotated[SourceType | None, Field(description="Only runs started from this source.")] = None,
    statuses: Annotated[list[Status] | None, Field(max_length=10, description=(
        "Service values ACTIVE, PENDING, COMPLETE, ERROR, FAILED, STOPPED, CANCELLED, or words: running, "
        "failed, done, finished, stopped (any case)."))] = None,
    pull_request: Annotated[PullRequestArg | None, Field(description=(
        "Only runs attached to it (URL, owner/repo#7 or pr_id); which one opened it is not reported."))] = None,
    metadata: Annotated[MetadataMatch | None, Field(
        description="Only runs whose metadata has these keys with these values.")] = None,
) -> Annotated[CallToolResult, RunList]:
    """List the organisation's agent runs, newest first, optionally filtered. statuses, pull_request and
    metadata are filtered here, over ≤500 runs a call (note says how far)."""
    client = await client_for(ctx)
    wanted = wanted_statuses(statuses)
    filtering = bool(wanted) or pull_request is not None or metadata is not None
    taken = RunsTaken(_max_chars(ctx), limit, wanted, pull_request, metadata)
    scan = await scan_runs(client, taken, skip=skip, page_size=SCAN_PAGE_SIZE if filtering else limit,
                           filtering=filtering, user_id=user_id, source_type=source_type)
    which = " and ".join([*([f"in {', '.join(sorted(wanted))}"] if wanted else []),
                          *([f"of pull request {pull_request}"] if pull_request else []),
                          *(["with the metadata asked"] if metadata is not None else [])])
    notes = [taken.note] if taken.note else []
    if scan.failed is not None:
        notes.append(f"stopped early ({scan.failed.kind}): continue from next_skip")
    if filtering:
        notes.append(scan.how_far())
    if wanted and not taken.runs and taken.seen:
        have = ", ".join(f"{status} {count}" for status, count in taken.seen.most_common())
        notes.insert(0, f"none of the {counted(taken.seen.total(), 'run')} read is in {', '.join(sorted(wanted))}; "
                        f"they are: {have}")
    if pull_request is not None and taken.runs:
        notes.append(opened_by(pull_request, taken.pull_request_found, taken.runs))
    if taken.shortened:
        notes.append(f"metadata shortened in {counted(len(taken.shortened), 'run')} "
                     f"({', '.join(map(str, taken.shortened))}): get_agent_run shows it whole")
    out = RunList(runs=taken.runs, total=scan.total, next_skip=scan.position,
                  note="; ".join(notes) or None)
    return ok(out, f"{counted(len(out.runs), 'run')}{f' {which}' if which else ''} (of "
                   f"{out.total if out.total is not None else 'unknown'} in total)"
                   f"{f'; next_skip={out.next_skip}' if out.next_skip is not None else ''}"
                   f"{f'; {out.note}' if out.note else ''}", render=_runs_text)


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


def metadata_matches(metadata: dict[str, Any] | None, wanted: dict[str, Any]) -> bool:
    """Every key wanted, with the same JSON value (1 is not true, "7" is not 7)."""
    return metadata is not None and all(
        key in metadata and _json_key(metadata[key]) == _json_key(value) for key, value in wanted.items())


def _json_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@dataclass
class RunsTaken:
    """The runs a list call returns: at most `limit`, only `wanted` statuses, runs of `pull_request` and runs with the
    `metadata` asked, within PAGE_ITEMS_CHARS."""

    max_chars: int
    limit: int
    wanted: set[str]
    pull_request: PullRequestName | None = None
    metadata: dict[str, Any] | None = None
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
        (a run left out by a filter is consumed too)."""
        for consumed, item in enumerate(items):
            if self.full:
                return consumed
            self.seen[label(item.status)] += 1
            if self.wanted and (item.status or "").upper() not in self.wanted:
                continue
            if self.pull_request is not None:
                if (pr := self.pull_request.found_in(item)) is None:
                    continue
                self.pull_request_found = self.pull_request_found or pr
            if self.metadata is not None and not metadata_matches(item.metadata, self.metadata):
                continue
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


@toolset.tool("Resume agent run", "resume_agent_run", run_field="id", viewed=True)
async def resume_agent_run(agent_run_id: Id, prompt: Prompt, ctx: Context,
                           model: Model | None = None) -> Annotated[CallToolResult, Run]:
    """Send a follow-up instruction to an existing agent run (e.g. to fix review comments or continue after
    it finished). Follow it with get_agent_run."""
    client = await client_for(ctx)
    resumed_at = datetime.now(UTC)
    run = Run.of(await client.resume_agent_run(agent_run_id, prompt, model=model), _max_chars(ctx), since=resumed_at)
    return ok(run, f"Resumed: {run.describe(since=resumed_at)}")
