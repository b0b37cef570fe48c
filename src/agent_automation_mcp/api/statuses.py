"""Every status the service gives an agent run, in one table: waits, tasks, the view, the status words, the prompts,
docs/tools.md and the sandbox all read it.

The OpenAPI types a run's status as a free string. Codegen's own clients (its Raycast extension's
`AgentRunStatusType`, "matching backend", and its CLI's status view) list what the service sends, and count
`TIMEOUT`, `MAX_ITERATIONS_REACHED` and `OUT_OF_TOKENS` as finished failures; a `PAUSED` run moves again only when
resumed. `COMPLETED` and `CANCELED` are how the service's docs spell two of them. The service sends upper case; any
case is read. A status nobody listed is "not finished": a wait goes on, a task stays working.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Final


@dataclass(frozen=True, slots=True)
class StatusKind:
    """What a group of statuses means: `word` is what people call it (the view's badge, a filter word); `finished`
    ends waits, tasks and the view's refresh; `failed` ends a task as an error; `waits_on_person`: nothing moves
    until someone resumes the run."""

    word: str
    finished: bool
    failed: bool = False
    waits_on_person: bool = False
    words: tuple[str, ...] = ()  # more words people use for it (`word` is one)


@dataclass(frozen=True, slots=True)
class Status:
    """One value the service sends; `reason`: why a run ended so, in words, where the value alone does not say it
    plainly; `words`: words people use for this value alone."""

    value: str
    kind: StatusKind
    reason: str | None = None
    words: tuple[str, ...] = ()


RUNNING: Final = StatusKind("running", finished=False, words=("active", "in progress", "ongoing"))
PENDING: Final = StatusKind("pending", finished=False, words=("queued", "waiting"))
PAUSED: Final = StatusKind("paused", finished=False, waits_on_person=True)
DONE: Final = StatusKind("done", finished=True, words=("complete", "completed", "succeeded", "success", "successful"))
FAILED: Final = StatusKind("failed", finished=True, failed=True, words=("fail", "failure", "error", "errored"))
STOPPED: Final = StatusKind("stopped", finished=True, words=("cancelled", "canceled"))
KINDS: Final = (RUNNING, PENDING, PAUSED, DONE, FAILED, STOPPED)

STATUSES: Final = (
    Status("ACTIVE", RUNNING),
    Status("RUNNING", RUNNING),
    Status("EVALUATION", RUNNING, words=("evaluating",)),
    Status("PENDING", PENDING),
    Status("PAUSED", PAUSED),
    Status("COMPLETE", DONE),
    Status("COMPLETED", DONE),
    Status("ERROR", FAILED),
    Status("FAILED", FAILED),
    Status("TIMEOUT", FAILED, "out of time (exceeded the time limit)", ("timed out", "out of time")),
    Status("MAX_ITERATIONS_REACHED", FAILED, "too many iterations (reached the maximum number of iterations)",
           ("max iterations", "too many iterations")),
    Status("OUT_OF_TOKENS", FAILED, "out of tokens (ran out of its token budget)", ("ran out of tokens",)),
    Status("STOPPED", STOPPED),
    Status("CANCELLED", STOPPED),
    Status("CANCELED", STOPPED),
)
BY_VALUE: Final = MappingProxyType({status.value: status for status in STATUSES})

# Counted by what they mean (list filters and counts read these, never a list of their own).
FINISHED: Final = frozenset(status.value for status in STATUSES if status.kind.finished)
FAILURES: Final = frozenset(status.value for status in STATUSES if status.kind.failed)
WAITING_ON_PERSON: Final = frozenset(status.value for status in STATUSES if status.kind.waits_on_person)
NOT_FINISHED: Final = frozenset(status.value for status in STATUSES if not status.kind.finished)


def _words() -> dict[str, tuple[str, ...]]:
    words: dict[str, tuple[str, ...]] = {}
    for kind in KINDS:
        values = tuple(status.value for status in STATUSES if status.kind is kind)
        words |= dict.fromkeys((kind.word, *kind.words), values)
    for status in STATUSES:
        words |= dict.fromkeys(status.words, (status.value,))
    words["finished"] = tuple(status.value for status in STATUSES if status.kind.finished)
    words["unfinished"] = words["not finished"] = tuple(status.value for status in STATUSES if not status.kind.finished)
    return words


# The words people use, each standing for the service's values it finds: a kind's words find all of its values
# ("running" finds EVALUATION too), a value's own words find it alone, "finished" every ending, "unfinished" the rest.
STATUS_WORDS: Final = MappingProxyType(_words())


def normalised(value: str | None) -> str:
    """`timed-out `, `Timeout`: the service's spelling (upper case, underscores)."""
    return "_".join((value or "").replace("-", " ").replace("_", " ").upper().split())


def status_of(value: str | None) -> Status | None:
    """The table's row for a status in any case; None for one nobody listed (or none at all)."""
    return BY_VALUE.get(normalised(value))


def is_finished(value: str | None) -> bool:
    status = status_of(value)
    return status is not None and status.kind.finished


def is_failure(value: str | None) -> bool:
    status = status_of(value)
    return status is not None and status.kind.failed


def waits_on_person(value: str | None) -> bool:
    status = status_of(value)
    return status is not None and status.kind.waits_on_person


def ending_reason(value: str | None) -> str | None:
    """Why a run that ended with `value` ended, in words, when the table says more than the status does."""
    status = status_of(value)
    return status.reason if status is not None else None


def kinds_by_value() -> dict[str, str]:
    """Each value's kind word, for the view's badges (the page is given this table, not a copy)."""
    return {status.value: status.kind.word for status in STATUSES}
