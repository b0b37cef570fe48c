"""The one reader of agent runs' statuses that everything following a run shares: tasks and their listen streams,
get_agent_run (its waits, and the view's refreshes, which call it), and a webhook delivery later (as a wake-up).

Each poll interval it asks the service once for the token's newest runs in an organisation (one list page, newest
first, `PAGE_RUNS` of them) and serves every followed run found there; a run not on that page falls back to a read
of its own, shared the same way, and one older than the whole page is not looked for there again. Both are shared
across replicas through Redis (this process's memory without one) and keyed by the token: ten runs followed cost
the service about one request per interval, whoever polls them and wherever. The interval follows pacing: when this
token's budget is spent, the wait it was told is the interval. What a start or a resume answered is remembered as
the moment its run last changed (`remember`): no reading sent before it is taken for the run's state. A list of the
newest runs read for a model is this interval's page (`remember_page`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from mcp.types import CallToolResult

from .api.client import AgentAutomationClient
from .api.errors import ApiError, NotFoundError, PermissionDeniedError, RateLimitError
from .api.models import AgentRun
from .caching import SharedCache, SharedStore

POLL_SECONDS: Final = 5.0  # a run takes minutes: a status five seconds old loses the client nothing
MAX_POLL_SECONDS: Final = 300.0
READ_SECONDS: Final = 20.0  # the read's own budget, well inside a request's
STATUS_ENTRIES: Final = 10_000  # runs (and pages) whose last status this process remembers at once
PAGE_RUNS: Final = 100  # the service's largest page: the newest runs, one request
OFF_PAGE_SECONDS: Final = 3600.0  # a run older than a whole page is read on its own this long before looking again
CHANGES_SECONDS: Final = 3600.0  # the statuses a page showed, to tell whose changed on the next one

Published = Callable[[int, int, dict[str, Any]], Awaitable[None]]


def now_ms() -> int:
    """Unix milliseconds: the clock of readings (and of task records)."""
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class Reading:
    """A run as last read, when the read was sent, and how long before it is worth reading again. Without a run,
    `problem` is the kind of error the read met: transient, or, with `ended` (the error result get_agent_run gives),
    for good."""

    run: AgentRun | None
    read_ms: int
    poll_ms: int
    problem: str | None = None
    ended: CallToolResult | None = None


# The service's answers that will not change by asking again: the run is gone, or this token may not see it.
FOR_GOOD: Final = (NotFoundError, PermissionDeniedError)
POLL_MS: Final = math.ceil(POLL_SECONDS * 1000)


class RunStatus:
    """`read` is the one way to a run's status; `published` hears of each run read from the service on its own, and
    of each run a page shows in a status other than the last page's (listeners)."""

    def __init__(self, store: SharedStore, ended: Callable[[ApiError], CallToolResult],
                 published: Published | None = None) -> None:
        self._pages: SharedCache[dict[str, Any]] = SharedCache(store, "runs-page", STATUS_ENTRIES)
        self._readings: SharedCache[dict[str, Any]] = SharedCache(store, "run-status", STATUS_ENTRIES)
        self._off_page: SharedCache[bool] = SharedCache(store, "run-off-page", STATUS_ENTRIES)
        self._shown: SharedCache[dict[str, str]] = SharedCache(store, "runs-page-shown", STATUS_ENTRIES)
        self._published = published
        self._ended = ended  # the error result get_agent_run gives for a run that cannot be read any more

    async def read(self, client: AgentAutomationClient, org_id: int, run_id: int, *,
                   seconds: float = READ_SECONDS) -> Reading:
        """The run's status, read from the service at most once per interval for everyone following the token's runs,
        within `seconds` (a wait for another replica's read included); the newest of the page's and the run's own.
        The service's errors are shared like a status, so pollers never multiply requests; a refusal by this token's
        pacing (nothing sent) is this caller's alone, and its wait becomes the poll interval."""
        owner = f"{client.credentials.token_key}-org{org_id}"
        key = f"{owner}-run{run_id}"
        own = await self._readings.get(key)
        written = own["read_ms"] if own is not None and own.get("written") else 0  # a start's or a resume's answer
        page: dict[str, Any] | None = None
        if not await self._off_page.get(key):
            refused: list[Reading] = []
            page = await self._pages.remembered(owner, lambda: self._page(client, org_id, owner, seconds, refused),
                                                fetch_seconds=seconds, accept=lambda page: page["read_ms"] >= written)
            if page is None:
                return refused[0] if refused else _not_read()
            if (found := page["runs"].get(str(run_id))) is not None:
                return Reading(AgentRun.model_validate(found), page["read_ms"], page["poll_ms"])
        reading = await self._own(client, org_id, run_id, key, seconds)
        if page is not None and page["full"] and page["lowest"] is not None and run_id < page["lowest"]:
            await self._off_page.put(key, True, OFF_PAGE_SECONDS)
        return reading

    async def remember(self, client: AgentAutomationClient, org_id: int, run: AgentRun, sent_ms: int) -> None:
        """A start or a resume sent at `sent_ms`: the run changed (`changed`), and listeners hear its answer."""
        reading = await self.changed(client, org_id, run.id, sent_ms, run)
        if self._published is not None:
            await self._published(org_id, run.id, reading)

    async def changed(self, client: AgentAutomationClient, org_id: int, run_id: int, sent_ms: int,
                      run: AgentRun | None = None) -> dict[str, Any]:
        """A write sent at `sent_ms` changed the run (a start, a resume, a task's stop): no reading sent before it is
        taken for the run's state while one may still be kept (the next follower reads again)."""
        reading = {"run": None if run is None else _shared(run), "read_ms": sent_ms, "poll_ms": POLL_MS,
                   "written": True}
        await self._readings.put(f"{client.credentials.token_key}-org{org_id}-run{run_id}", reading,
                                 POLL_SECONDS + READ_SECONDS)
        return reading

    async def remember_page(self, client: AgentAutomationClient, org_id: int, runs: list[AgentRun], total: int | None,
                            sent_ms: int) -> None:
        """The token's newest runs as a model's list read them (the first page, unfiltered), as this interval's page
        when it is one (`PAGE_RUNS` runs, or all there are): following them costs no read more."""
        if len(runs) < PAGE_RUNS and (total is None or len(runs) < total):
            return
        owner = f"{client.credentials.token_key}-org{org_id}"
        page = _page_of(runs, sent_ms)
        await self._pages.put(owner, page, POLL_SECONDS)
        await self._tell_changes(org_id, owner, page)

    async def _page(self, client: AgentAutomationClient, org_id: int, owner: str, seconds: float,
                    refused: list[Reading]) -> tuple[dict[str, Any], float] | None:
        """One read of the newest runs, remembered for the interval; a service error is remembered too (its
        runs are then read on their own), a refusal by pacing is not."""
        sent = now_ms()
        try:
            listed = await client.within(seconds).list_agent_runs(limit=PAGE_RUNS)
        except RateLimitError as exc:  # this token's budget, nothing sent: not shared with other tokens
            refused.append(_refused(exc))
            return None
        except ApiError as exc:
            return {"runs": {}, "full": False, "lowest": None, "problem": exc.kind, "read_ms": sent,
                    "poll_ms": POLL_MS}, POLL_SECONDS
        page = _page_of(listed.items, sent)
        await self._tell_changes(org_id, owner, page)
        return page, POLL_SECONDS

    async def _tell_changes(self, org_id: int, owner: str, page: dict[str, Any]) -> None:
        """Listeners hear each run the page shows in another status than the last page did (a first page: none)."""
        shown = {run_id: str(run.get("status")) for run_id, run in page["runs"].items()}
        before = await self._shown.get(owner)
        await self._shown.put(owner, shown, CHANGES_SECONDS)
        if before is None or self._published is None:
            return
        for run_id, status in shown.items():
            if before.get(run_id, status) != status:
                await self._published(org_id, int(run_id), {"run": page["runs"][run_id], "read_ms": page["read_ms"],
                                                             "poll_ms": page["poll_ms"]})

    async def _own(self, client: AgentAutomationClient, org_id: int, run_id: int, key: str,
                   seconds: float) -> Reading:
        """The run read on its own (off the page), at most once per interval for everyone following it."""
        refused: list[Reading] = []

        async def fetch() -> tuple[dict[str, Any], float] | None:
            sent = now_ms()
            try:
                reading: dict[str, Any] = {"run": _shared(await client.within(seconds).get_agent_run(run_id))}
            except RateLimitError as exc:
                refused.append(_refused(exc))
                return None
            except ApiError as exc:
                reading = {"problem": exc.kind}
                if isinstance(exc, FOR_GOOD):
                    reading["ended"] = self._ended(exc).model_dump(mode="json", by_alias=True, exclude_none=True)
            reading |= {"read_ms": sent, "poll_ms": POLL_MS}
            if self._published is not None:
                await self._published(org_id, run_id, reading)
            return reading, POLL_SECONDS

        # A start's or resume's answer (see `remember`) only says when the run last changed: it is read again.
        value = await self._readings.remembered(key, fetch, fetch_seconds=seconds,
                                                accept=lambda reading: not reading.get("written"))
        if value is None:
            return refused[0] if refused else _not_read()
        return reading_of(value)


def _shared(run: AgentRun) -> dict[str, Any]:
    """A run as the service sent it, for the cache and the channel (`is_terminal` is ours: derived again on reading)."""
    return run.model_dump(mode="json", exclude={"is_terminal"})


def _page_of(runs: list[AgentRun], sent_ms: int) -> dict[str, Any]:
    """A page as it is shared: the runs by id (as text: JSON keys), whether it was full, its lowest id."""
    return {"runs": {str(run.id): _shared(run) for run in runs}, "full": len(runs) >= PAGE_RUNS,
            "lowest": min((run.id for run in runs), default=None), "read_ms": sent_ms, "poll_ms": POLL_MS}


def _refused(exc: RateLimitError) -> Reading:
    wait = min(MAX_POLL_SECONDS, max(POLL_SECONDS, exc.retry_after or POLL_SECONDS))
    return Reading(None, now_ms(), math.ceil(wait * 1000), exc.kind)


def _not_read() -> Reading:
    return Reading(None, now_ms(), POLL_MS, "not read")


def reading_of(value: dict[str, Any]) -> Reading:
    """A reading as it is shared (cache, channel) made whole again."""
    run = AgentRun.model_validate(value["run"]) if value.get("run") is not None else None
    ended = CallToolResult.model_validate(value["ended"]) if value.get("ended") is not None else None
    return Reading(run, value["read_ms"], value["poll_ms"], value.get("problem"), ended)
