"""An agent run's life on a clock: planned trace entries become visible as time passes, then a terminal status.

Nothing runs in the background: every request first calls `advance`, which catches a run up with the clock.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from ..api.statuses import DONE, FAILURES, FINISHED, NOT_FINISHED, WAITING_ON_PERSON, ending_reason, status_of
from .trace import TraceContext, build_entry, long_trace_types, segment_types

TimeStyle = Literal["space", "iso"]
# The service's statuses (`api.statuses`, the one table): a run moves on the clock in these, and ends in any other.
MOVING = NOT_FINISHED - WAITING_ON_PERSON
LONG_TRACE_STEP = 1.5  # seconds between the entries of a fixture trace


def format_time(wall: float, style: TimeStyle) -> str:
    """Both formats the service sends: `2025-06-21 11:20:04.338398` and `2025-06-21T11:20:04.338398Z`."""
    moment = datetime.fromtimestamp(wall, UTC)
    if style == "space":
        return moment.strftime("%Y-%m-%d %H:%M:%S.%f")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(slots=True)
class PlannedEntry:
    due: float  # time.monotonic() at which the entry appears
    entry: dict[str, Any]
    opens_pull_request: bool = False


@dataclass
class Run:
    id: int
    organization_id: int
    user_id: int
    repo_id: int | None
    prompt: str
    source_type: str
    created_at: str
    time_style: TimeStyle
    metadata: dict[str, Any] | None = None
    model: str | None = None
    images: list[str] = field(default_factory=list)  # as sent; the service gives them to the agent
    status: str = "ACTIVE"
    outcome: str = "COMPLETE"  # the status the current stretch of work ends in
    result: str | None = None
    summary: str | None = None
    pull_request_ids: list[int] = field(default_factory=list)
    # (id, number) of the pull request it will open, reserved at creation so that numbering does not depend on
    # which of several runs reaches its pull-request step first.
    reserved_pull_request: tuple[int, int] | None = None
    logs: list[dict[str, Any]] = field(default_factory=list)
    pending: deque[PlannedEntry] = field(default_factory=deque)
    ends_at: float | None = None
    segments: int = 0
    beyond_spec: dict[str, Any] = field(default_factory=dict)  # fields it is sent with that the OpenAPI does not name

    @property
    def web_url(self) -> str:
        return f"https://codegen.com/agent/trace/{self.id}"

    @property
    def active(self) -> bool:
        """Going on with the clock: not finished, and not waiting for someone to resume it."""
        return self.status in MOVING


PullRequestOpener = Callable[[Run, dict[str, Any]], None]


def plan_segment(run: Run, *, seed: int, start: float, start_wall: float, duration: float, quirks: bool,
                 repo_full_name: str | None, error_fraction: float = 0.0, outcome: str | None = None,
                 user_text: str | None = None) -> None:
    """Plan one stretch of work (the first, or one per resume) spread evenly over `duration` seconds."""
    rng = random.Random(f"{seed}:run:{run.id}:segment:{run.segments}")
    if outcome is None:
        outcome = "ERROR" if rng.random() < error_fraction else "COMPLETE"
    types = segment_types(rng, first=run.segments == 0, has_repo=run.repo_id is not None, outcome=outcome)
    ctx = TraceContext(run.id, run.prompt, repo_full_name, quirks)
    last = len(types) - 1
    for index, message_type in enumerate(types):
        offset = duration * index / last if last else duration
        created_at = format_time(start_wall + offset, run.time_style)
        text = user_text if message_type == "USER_MESSAGE" and index == 0 and run.segments else None
        built = build_entry(message_type, rng, ctx, created_at, fatal=message_type == "ERROR" and index == last,
                            text=text)
        run.pending.append(PlannedEntry(start + offset, built, message_type == "INITIAL_PR_GENERATION"))
    run.segments += 1
    run.status, run.outcome, run.result, run.summary = "ACTIVE", outcome, None, None
    run.ends_at = start + duration


def advance(run: Run, now: float, open_pull_request: PullRequestOpener) -> None:
    """Show the entries due by `now`; end the run when its last entry is out."""
    while run.pending and run.pending[0].due <= now:
        planned = run.pending.popleft()
        if planned.opens_pull_request:
            open_pull_request(run, planned.entry)
        run.logs.append(planned.entry)
    if run.active and not run.pending and run.ends_at is not None and now >= run.ends_at:
        _finish(run)


def stop(run: Run, reason: str) -> None:
    run.pending.clear()
    run.status, run.ends_at, run.result = "STOPPED", None, reason


def end_now(run: Run, status: str) -> None:
    """The run ends in `status` (any the service gives, failures included) or pauses (`PAUSED`: it waits, with what
    was still to come dropped, until a resume plans more work), as the service ends runs."""
    run.pending.clear()
    run.ends_at = None
    if status in WAITING_ON_PERSON:
        run.status = status
        return
    run.outcome = status
    _finish(run)


def fill_long_trace(run: Run, *, seed: int, count: int, outcome: str, start_wall: float, quirks: bool,
                    repo_full_name: str | None) -> None:
    """Give a run `count` entries at once (fixtures and benchmarks); `outcome` may be any status."""
    rng = random.Random(f"{seed}:run:{run.id}:long")
    ctx = TraceContext(run.id, run.prompt, repo_full_name, quirks)
    types = long_trace_types(count, outcome if outcome in ("COMPLETE", "ERROR") else None)
    last = len(types) - 1
    for index, message_type in enumerate(types):
        created_at = format_time(start_wall + LONG_TRACE_STEP * index, run.time_style)
        fatal = message_type == "ERROR" and index == last and outcome == "ERROR"
        run.logs.append(build_entry(message_type, rng, ctx, created_at, fatal=fatal))
    run.segments += 1
    run.outcome = outcome if outcome in FINISHED else "COMPLETE"
    if outcome in FINISHED or outcome in WAITING_ON_PERSON:
        end_now(run, outcome)


def _finish(run: Run) -> None:
    run.status, run.ends_at = run.outcome, None
    final = next((e for e in reversed(run.logs) if e["message_type"] in ("FINAL_ANSWER", "ERROR")), None)
    observation = final["observation"] if final else None
    if isinstance(observation, dict):
        observation = observation.get("answer") or observation.get("message")
    known = status_of(run.outcome)
    if known is not None and known.kind is DONE:
        run.result = observation if isinstance(observation, str) else f"Done: {run.prompt[:80]}"
        run.summary = f"Completed: {run.prompt[:60]}"
    elif (reason := ending_reason(run.outcome)) is not None:  # a limit it reached: the service says which
        run.result = f"The agent run stopped, {reason}."
        run.summary = f"The agent run ended {run.outcome}."
    elif run.outcome in FAILURES:
        run.result = observation if isinstance(observation, str) else "The agent run failed."
        run.summary = "The agent run ended with an error."
    else:  # stopped or cancelled
        run.result = run.result or "Stopped by the user."
