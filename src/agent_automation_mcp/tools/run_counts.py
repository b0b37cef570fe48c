"""Runs as counts, `list_agent_runs(counts=true)`: how many, by status (the status table's words), by source, by
repository where a pull request names it, and which failed, in at most `COUNTS_TOKENS` for any number of runs.

"How many runs did we start today, how many failed, and on which repositories?" read as lines took two full pages
for 128 runs, and a model doing the arithmetic. Counted here, the answer's size does not grow with the runs: every
part of the result is kept within a share of characters (what does not fit is counted together, and said), and the
text is written from that result.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from ..api.models import AgentRun, github_pull_request
from ..api.statuses import is_failure, status_of
from .bounded_text import bounded_line, fitting
from .results import Output, compact_json, label
from .run_filters import RunFilter

COUNTS_TOKENS: Final = 800  # what a model reads of the answer (summary and text), characters / 4, at most
# Each part's share of the structured result, in characters of JSON: with the summary and the list's own fields,
# under COUNTS_TOKENS * 4 whatever the runs hold. The text writes the same parts in fewer characters.
SHARE_CHARS: Final = {"by_status": 300, "by_source": 300, "by_repository": 1200, "failed": 500}
OTHERS: Final = "others"  # the key of what a share could not keep apart
ItemT = TypeVar("ItemT", bound=Output)


class RepositoryRuns(Output):
    repository: str | None  # owner/repo from a pull request's URL; None: runs no pull request names a repository of
    runs: int
    failed: int


class FailedRun(Output):
    id: int
    status: str | None = None


class RunCounts(Output):
    runs: int
    by_status: dict[str, int]  # the status table's words (done, failed, running, paused...); an unlisted status as sent
    by_source: dict[str, int]
    by_repository: list[RepositoryRuns]  # most runs first; a run with pull requests on two counts on both
    other_repositories: int = 0  # repositories left out of by_repository for room
    failed: list[FailedRun]  # newest first
    failed_not_named: int = 0  # failed runs left out of `failed` for room


@dataclass
class RunCounter:
    """Counts the runs `filter` admits of every page a scan gives it; it is never full."""

    filter: RunFilter
    runs: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    sources: Counter[str] = field(default_factory=Counter)
    repositories: dict[str | None, list[int]] = field(default_factory=dict)  # lower-cased name -> [runs, failed]
    names: dict[str, str] = field(default_factory=dict)  # lower-cased -> as first written
    failed: list[FailedRun] = field(default_factory=list)

    @property
    def full(self) -> bool:
        return False

    def take(self, items: list[AgentRun]) -> int:
        for item in items:
            if self.filter.admits(item):
                self._count(item)
        return len(items)

    def _count(self, run: AgentRun) -> None:
        self.runs += 1
        known = status_of(run.status)
        self.statuses[known.kind.word if known is not None else label(run.status)] += 1
        self.sources[label(run.source_type)] += 1
        failed = is_failure(run.status)
        named = {name.lower(): name for pr in run.github_pull_requests or () if pr.url
                 and (name := github_pull_request(pr.url)[0]) is not None}
        for key in named or (None,):
            tally = self.repositories.setdefault(key, [0, 0])
            tally[0] += 1
            tally[1] += failed
            if key is not None:
                self.names.setdefault(key, named[key])
        if failed:
            self.failed.append(FailedRun(id=run.id, status=label(run.status)))

    def counts(self) -> RunCounts:
        """What was counted, each part within its share."""
        ranked = sorted(self.repositories.items(), key=lambda item: (item[0] is None, -item[1][0]))
        repositories = [RepositoryRuns(repository=self.names[key] if key is not None else None, runs=runs,
                                       failed=failed) for key, (runs, failed) in ranked]
        kept = _within(repositories, SHARE_CHARS["by_repository"])
        named = _within(self.failed, SHARE_CHARS["failed"])
        return RunCounts(runs=self.runs, by_status=_top(self.statuses, SHARE_CHARS["by_status"]),
                         by_source=_top(self.sources, SHARE_CHARS["by_source"]), by_repository=kept,
                         other_repositories=len(repositories) - len(kept), failed=named,
                         failed_not_named=len(self.failed) - len(named))


def _top(counter: Counter[str], share: int) -> dict[str, int]:
    """The largest counts that fit in `share` characters of JSON; the rest together under OTHERS."""
    kept: dict[str, int] = {}
    room = share - len(compact_json({OTHERS: sum(counter.values())}))
    for name, count in counter.most_common():
        room -= len(compact_json({name: count}))
        if room < 0:
            kept[OTHERS] = kept.get(OTHERS, 0) + count
            continue
        kept[name] = count
    return kept


def _within(items: list[ItemT], share: int) -> list[ItemT]:
    """The first `items` whose JSON fits in `share` characters (a comma after each)."""
    return items[:len(fitting([item.model_dump_json() for item in items], share, 1))]


def render_counts(page: dict[str, Any]) -> str:
    """The counts as text, a line per part: what a model reads instead of a list's lines."""
    counts = page["counts"]
    head = [*([f"since {page['since']}"] if page.get("since") else []), f"runs: {counts['runs']}"]
    lines = ["; ".join(head)]
    for part, name in (("by_status", "status"), ("by_source", "source")):
        lines.append(f"{name}: " + (", ".join(f"{key} {count}" for key, count in counts[part].items()) or "none"))
    repositories = [_repository(repo) for repo in counts["by_repository"]]
    total = len(repositories) + counts["other_repositories"]
    lines.append(bounded_line("repository (runs, from pull requests' URLs)", SHARE_CHARS["by_repository"],
                              repositories, total, "more repositories"))
    failed = [f"{run['id']} {run['status']}" for run in counts["failed"]]
    lines.append(bounded_line("failed, newest first", SHARE_CHARS["failed"], failed,
                              len(failed) + counts["failed_not_named"], "more: statuses [\"failed\"] lists them")
                 if failed else "failed: none")
    return "\n".join(lines)


def _repository(repo: dict[str, Any]) -> str:
    """`owner/repo 50 (3 failed)`, or `38 with no pull request (7 failed): ...` for the runs of no repository named."""
    failed = f" ({repo['failed']} failed)" if repo["failed"] else ""
    if repo["repository"] is None:
        return f"{repo['runs']} with no pull request{failed}: the service does not report their repository"
    return f"{repo['repository']} {repo['runs']}{failed}"
