"""What a list of runs is filtered on here, where the service cannot: statuses in people's words, a pull request,
metadata as people type it, and a time bound.

Metadata is matched as people mean a tag, not as a script typed it: `{"sprint": 14}` finds a run tagged
`"sprint": "14"` by another script. Numbers by value, written as numbers or as text (14, 14.0, "14"; "014" is text);
true and false as booleans or as text in any case (never 1 or 0); other text trimmed and in any case; keys in any
case; a list holds a value asked when any of its items matches it, and each value of a list asked; an object holds the
keys and values asked, as the metadata itself does. Null matches null only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Annotated, Any, Final

from pydantic import PlainValidator, WithJsonSchema

from ..api.models import AgentRun
from ..api.statuses import STATUS_WORDS, normalised
from .results import instant
from .run_scan import PullRequestName

MAX_HOURS: Final = 24 * 366  # how far back `since` may reach in hours
MAX_SINCE_CHARS: Final = 40  # an ISO 8601 time with its offset and fractions
FUTURE_LEEWAY: Final = timedelta(minutes=5)  # a bound this far past the server's clock is still taken
MAX_DEPTH: Final = 20  # of metadata compared value by value; deeper, as its whole JSON
_JSON_NUMBER: Final = re.compile(r"-?(?:0|[1-9]\d{0,99})(?:\.\d{1,100})?(?:[eE][+-]?\d{1,4})?")
_HOURS: Final = re.compile(r"(\d{1,5}) ?h(?:ours?)?", re.IGNORECASE)
EXAMPLE: Final = "2025-06-21T00:00:00-07:00 (the user's day, with their UTC offset) or 24h"


@dataclass(frozen=True, slots=True)
class TimeBound:
    """The instant a list reads back to (newest first, it stops at the first run created before it), and how the
    caller gave it, for the answer to say."""

    instant: datetime
    given: str  # `2025-06-21T00:00:00-07:00 as given`, `the last 24 hours by this server's clock`

    @property
    def utc(self) -> str:
        return f"{self.instant:%Y-%m-%dT%H:%M:%SZ}"

    def said(self) -> str:
        """`created since 2025-06-21T07:00:00Z (UTC; the last 8 hours by this server's clock)`."""
        return f"created since {self.utc} (UTC; {self.given})"

    def before(self, run: AgentRun) -> bool:
        """Whether `run` was created before the bound; a run whose time is unreadable is not."""
        created = instant(run.created_at)
        return created is not None and created < self.instant


def time_bound(given: Any) -> TimeBound:
    """`since` as the caller wrote it: hours back from now on this server's clock (`24h`), or an ISO 8601 time
    (`2025-06-21T00:00:00-07:00`; `2025-06-21 07:00` and `2025-06-21`, its start, without an offset are UTC, and the
    answer says so)."""
    text = given.strip() if isinstance(given, str) else ""
    if not text or len(text) > MAX_SINCE_CHARS:
        raise ValueError(f"since takes an ISO 8601 time or hours back: {EXAMPLE}")
    now = datetime.now(UTC).replace(microsecond=0)
    if hours := _HOURS.fullmatch(text):
        if not 1 <= int(hours[1]) <= MAX_HOURS:
            raise ValueError(f"since reaches back 1 to {MAX_HOURS} hours, got {text!r}")
        return TimeBound(now - timedelta(hours=int(hours[1])), f"the last {int(hours[1])} hours by this server's clock")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is neither an ISO 8601 time nor hours back: write {EXAMPLE}") from None
    zoned = moment.tzinfo is not None
    moment = (moment if zoned else moment.replace(tzinfo=UTC)).astimezone(UTC)
    if moment > now + FUTURE_LEEWAY:
        raise ValueError(f"since {moment:%Y-%m-%dT%H:%M:%SZ} is in the future (this server's clock says "
                         f"{now:%Y-%m-%dT%H:%M:%SZ}): check the date and the UTC offset")
    return TimeBound(moment, f"{text} as given" if zoned else
                     f"{text} had no UTC offset, so it was read as UTC: for the user's day, give their offset")


# `since`: a string in the schema, read into the bound it names.
SinceArg = Annotated[TimeBound, PlainValidator(time_bound),
                     WithJsonSchema({"type": "string", "maxLength": MAX_SINCE_CHARS})]


def wanted_statuses(asked: list[str] | None) -> frozenset[str]:
    """The service's values for the statuses asked, in the words people use or the service's own (any case)."""
    wanted: set[str] = set()
    for word in asked or ():
        key = " ".join(word.replace("_", " ").replace("-", " ").lower().split())
        wanted.update(STATUS_WORDS.get(key, (normalised(key),)))
    return frozenset(wanted)


@dataclass(frozen=True, slots=True)
class RunFilter:
    """The runs a list keeps of those it reads: in `statuses` (the service's values), attached to `pull_request`, with
    `metadata`. Nothing asked: every run."""

    statuses: frozenset[str] = frozenset()
    pull_request: PullRequestName | None = None
    metadata: Mapping[str, Any] | None = None

    def admits(self, run: AgentRun) -> bool:
        return ((not self.statuses or normalised(run.status) in self.statuses)
                and (self.pull_request is None or self.pull_request.found_in(run) is not None)
                and (self.metadata is None or metadata_matches(run.metadata, self.metadata)))

    def said(self) -> str:
        """`in ERROR, FAILED and of pull request o/r#7 and with the metadata asked`; empty when nothing is asked."""
        return " and ".join([*([f"in {', '.join(sorted(self.statuses))}"] if self.statuses else []),
                             *([f"of pull request {self.pull_request}"] if self.pull_request else []),
                             *(["with the metadata asked"] if self.metadata is not None else [])])


def metadata_matches(metadata: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    """Every key wanted (in any case) holding a value that matches the one wanted, as the module says."""
    return metadata is not None and _matches(dict(metadata), dict(wanted), 0)


def _matches(stored: object, wanted: object, depth: int) -> bool:
    if depth > MAX_DEPTH:
        return stored == wanted
    if isinstance(wanted, dict):
        return isinstance(stored, dict) and all(
            any(_matches(value, want, depth + 1) for key, value in stored.items() if _key(key) == _key(name))
            for name, want in wanted.items())
    if isinstance(wanted, list):
        return isinstance(stored, list) and all(any(_matches(item, want, depth + 1) for item in stored)
                                                for want in wanted)
    if isinstance(stored, list):
        return any(_matches(item, wanted, depth + 1) for item in stored)
    return not isinstance(stored, dict) and _scalar(stored) == _scalar(wanted)


def _key(name: str) -> str:
    return name.strip().casefold()


def _scalar(value: Any) -> tuple[str, Any]:
    """A scalar as people mean it: a number by value, whether sent as a number or as its text; true and false in any
    case; other text trimmed and in any case."""
    if value is None or isinstance(value, bool):
        return "literal", value
    if isinstance(value, int | float):
        finite = value == value and abs(value) != float("inf")
        return ("number", Decimal(repr(value))) if finite else ("text", repr(value))
    text = str(value).strip()
    if _JSON_NUMBER.fullmatch(text):
        return "number", Decimal(text)
    if text.casefold() in ("true", "false"):
        return "literal", text.casefold() == "true"
    return "text", text.casefold()
