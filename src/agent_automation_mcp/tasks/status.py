"""The one read of an agent run's status that every follower of the run shares.

Tasks and their listen streams call `RunStatus.read`, and so would a webhook delivery announcing a run's end (once
it drops the run's reading). Whoever asks, one read of a run serves every poll of it for a poll interval, across
replicas through Redis (this process's memory without one), so a hundred clients polling one run cost the service
one request per interval. The interval follows pacing: when this token's budget is spent, the wait it was told is
the interval.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from mcp.types import CallToolResult

from ..api.client import AgentAutomationClient
from ..api.errors import ApiError, NotFoundError, PermissionDeniedError, RateLimitError
from ..api.models import AgentRun
from ..caching import SharedCache, SharedStore
from ..tools.errors import error_result
from .ids import now_ms

POLL_SECONDS: Final = 5.0  # a run takes minutes: a status five seconds old loses the client nothing
MAX_POLL_SECONDS: Final = 300.0
READ_SECONDS: Final = 20.0  # the read's own budget, well inside a request's
STATUS_ENTRIES: Final = 10_000  # runs whose last status this process remembers at once


@dataclass(frozen=True, slots=True)
class Reading:
    """A run as last read, when, and how long before it is worth reading again. Without a run, `problem` is the kind
    of error the read met: transient, or, with `ended` (the error result get_agent_run gives), for good."""

    run: AgentRun | None
    read_ms: int
    poll_ms: int
    problem: str | None = None
    ended: CallToolResult | None = None


# The service's answers that will not change by asking again: the run is gone, or this token may not see it.
FOR_GOOD: Final = (NotFoundError, PermissionDeniedError)


class RunStatus:
    """`read` is the one way to a run's status; `published` hears of every read made from the service (listeners)."""

    def __init__(self, store: SharedStore,
                 published: Callable[[int, int, dict[str, Any]], Awaitable[None]] | None = None) -> None:
        self._readings: SharedCache[dict[str, Any]] = SharedCache(store, "run-status", STATUS_ENTRIES)
        self._published = published

    async def read(self, client: AgentAutomationClient, org_id: int, run_id: int, *,
                   seconds: float = READ_SECONDS) -> Reading:
        """The run's status, read from the service at most once per interval for everyone following it, within
        `seconds` (a wait for another replica's read included). The service's errors are shared like a status, so
        pollers never multiply requests; a refusal by this token's pacing (nothing sent) is this caller's alone,
        and its wait becomes the poll interval."""

        refused: list[Reading] = []

        async def fetch() -> tuple[dict[str, Any], float] | None:
            try:
                reading: dict[str, Any] = {"run": (await client.within(seconds).get_agent_run(run_id)).model_dump(
                    mode="json")}
            except RateLimitError as exc:  # this token's budget, nothing sent: not shared with other tokens
                wait = min(MAX_POLL_SECONDS, max(POLL_SECONDS, exc.retry_after or POLL_SECONDS))
                refused.append(Reading(None, now_ms(), math.ceil(wait * 1000), exc.kind))
                return None
            except ApiError as exc:
                reading = {"problem": exc.kind}
                if isinstance(exc, FOR_GOOD):
                    reading["ended"] = error_result(exc).model_dump(mode="json", by_alias=True, exclude_none=True)
            reading |= {"read_ms": now_ms(), "poll_ms": math.ceil(POLL_SECONDS * 1000)}
            if self._published is not None:
                await self._published(org_id, run_id, reading)
            return reading, POLL_SECONDS

        value = await self._readings.remembered(f"org{org_id}-run{run_id}", fetch, fetch_seconds=seconds)
        if value is None:
            return refused[0] if refused else Reading(None, now_ms(), math.ceil(POLL_SECONDS * 1000), "not read")
        return reading_of(value)


def reading_of(value: dict[str, Any]) -> Reading:
    """A reading as it is shared (cache, channel) made whole again."""
    run = AgentRun.model_validate(value["run"]) if value.get("run") is not None else None
    ended = CallToolResult.model_validate(value["ended"]) if value.get("ended") is not None else None
    return Reading(run, value["read_ms"], value["poll_ms"], value.get("problem"), ended)
