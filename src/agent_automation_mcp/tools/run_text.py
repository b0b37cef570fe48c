"""The text of a list of runs: one line per run, in the fewest tokens that keep what a model reads a list for.

The structured content keeps every field whole. The text leaves out what the summary line already says (total,
next_skip, note), nulls, `is_terminal` (the status says it), a value every run shares (said once, in the head), a
`web_url` that is the run's usual address and a pull request's `url` that is GitHub's (written `owner/repo#N`, or `#N`
when every pull request of the list is on one repository, which the head names), and the date and hour a time shares
with the time written before it (a run's, or a pull request's: the legend says how to read it). A run's result (its
final answer: a list tells runs apart by their summaries) is folded past `RESULT_FOLD_CHARS`, other service text past
`LIST_FOLD_CHARS`, and the legend says that `get_agent_run(id)` reads them whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ..api.models import github_pull_request
from .line_text import TIME_LEGEND, flat, fold, scalar, value_text, when

LIST_FOLD_CHARS: Final = 100  # of a run's summary, metadata or a pull request's title, in the text of a list
RESULT_FOLD_CHARS: Final = 48  # of a run's result
SAID_IN_SUMMARY: Final = frozenset({"total", "next_skip", "note"})
# Written once in the head when every run has the same value, else on each line: a source as a word, the rest
# as `name=value`.
SHARED: Final = ("source_type", "organization_id")
RUNS_LEGEND: Final = ("runs, one a line: id status created_at source_type [elapsed_seconds s]: result | sum: summary | "
                      f"meta: metadata | pr pr_id owner/repo#number head_branch_name created_at: title; {TIME_LEGEND}")
FOLD_LEGEND: Final = "…+C: C more characters; get_agent_run(id) reads the run whole"


def render_runs(page: dict[str, Any], usual_web_url: Callable[[int], str]) -> str:
    """`page` (a list's structured content) as text: a head of what every run shares, a legend, one line per run.
    `usual_web_url(id)`: a run's address when the service sends no other, which the text does not write."""
    runs: list[dict[str, Any]] = page.get("runs") or []
    shared = {name: runs[0].get(name) for name in SHARED
              if runs and runs[0].get(name) is not None and all(run.get(name) == runs[0][name] for run in runs)}
    repos = {github_pull_request(pr["url"])[0] if isinstance(pr.get("url"), str) else None
             for run in runs for pr in run.get("pull_requests") or []}
    repo = next(iter(repos)) if len(repos) == 1 else None  # every pull request's, said once
    head = [f"{name}={scalar(value)}" for name, value in page.items()
            if name not in SAID_IN_SUMMARY and name != "runs" and value is not None]
    head += [f"every run: {' '.join(f'{name}={scalar(value)}' for name, value in shared.items())}"] if shared else []
    head += [f"every pr on {repo}"] if repo is not None else []
    lines: list[str] = []
    minute = None
    folded = False
    for run in runs:
        stamp, minute = when(run.get("created_at"), minute)
        words = [str(run.get("id")), scalar(run["status"]) if run.get("status") is not None else "status=null", stamp]
        words += [scalar(run[name]) if name == "source_type" else f"{name}={scalar(run[name])}"
                  for name in SHARED if name not in shared and run.get(name) is not None]
        if run.get("elapsed_seconds") is not None:
            words.append(f"{run['elapsed_seconds']}s")
        if run.get("web_url") not in (None, usual_web_url(run.get("id", 0))):
            words.append(f"web_url={scalar(run['web_url'])}")
        line = " ".join(word for word in words if word)
        parts: list[str] = []
        for key, before in (("result", ""), ("summary", "sum: ")):
            if run.get(key) is not None:
                text, cut = _folded(run[key], RESULT_FOLD_CHARS if key == "result" else LIST_FOLD_CHARS)
                folded |= cut
                parts.append(f"{before}{text}")
        if run.get("result") is not None:
            line = f"{line}: {parts.pop(0)}"
        if run.get("metadata"):
            parts.append(f"meta: {value_text(run['metadata'])}")
        for pr in run.get("pull_requests") or []:
            text, cut, minute = _pull_request(pr, minute, repo)
            folded |= cut
            parts.append(text)
        lines.append(" | ".join([line, *parts]))
    legend = [RUNS_LEGEND, *([FOLD_LEGEND] if folded else [])]
    return "\n".join([*(["; ".join(head)] if head else []), "; ".join(legend) + ":", *lines])


def _pull_request(pr: dict[str, Any], minute: str | None, shared_repo: str | None) -> tuple[str, bool, str | None]:
    """`pr pr_id owner/repo#N branch created_at: title` (`#N` on `shared_repo`); the url whole when it is not
    GitHub's usual one. Also whether the title was folded, and the minute the next time is written against."""
    url = pr.get("url")
    repo, number = github_pull_request(url) if isinstance(url, str) else (None, None)
    where = f"{'' if repo == shared_repo else repo}#{number}" if repo is not None and number == pr.get("number") else (
        f"url={scalar(url)}" if url is not None else "")
    if repo is None and pr.get("number") is not None:
        where = f"number={pr['number']} {where}".strip()
    stamp, minute = when(pr.get("created_at"), minute)
    words = ["pr", str(pr.get("pr_id")), where, scalar(pr["head_branch_name"]) if pr.get("head_branch_name") else "",
             stamp]
    line = " ".join(word for word in words if word)
    if pr.get("title") is None:
        return line, False, minute
    title, cut = _folded(pr["title"], LIST_FOLD_CHARS)
    return f"{line}: {title}", cut, minute


def _folded(value: Any, chars: int) -> tuple[str, bool]:
    """Service text on one line, folded past `chars`; and whether it was."""
    text = flat(value) if isinstance(value, str) else value_text(value)
    return (fold(text, chars), True) if len(text) > chars else (text, False)
