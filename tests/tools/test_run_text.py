"""The text of a list of runs: one line per run, every value of every run written or folded, nothing twice."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest
from sandboxed import connected

from agent_automation_mcp.tools.line_text import TIME_LEGEND
from agent_automation_mcp.tools.run_text import (
    FOLD_LEGEND,
    LIST_FOLD_CHARS,
    RESULT_FOLD_CHARS,
    RUNS_LEGEND,
    render_runs,
)
from agent_automation_mcp.tools.runs import usual_web_url

FIXTURE_REPO = 201  # the sandbox's web-app


def _escaped(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)[1:-1]


def _written(value: str | None, line: str, chars: int = LIST_FOLD_CHARS) -> bool:
    """The value is on the line whole, or its first `chars` characters with how many more there are."""
    if value is None:
        return True
    text = _escaped(value)
    return text in line if len(text) <= chars else f"{text[:chars]}…+{len(text) - chars}" in line


@pytest.mark.anyio
async def test_ten_runs_with_pull_requests_read_in_under_half_the_tokens_of_their_json_with_every_value() -> None:
    async with connected() as (client, sandbox):
        for number in range(10):
            made = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={
                "repo_id": FIXTURE_REPO, "with_pull_request": True, "prompt": f"Fix the flaky test in module {number}",
                "status": "ACTIVE" if number == 9 else "COMPLETE"})
            assert made.status_code == 200, made.text
        await client.call_tool("create_agent_run", {"prompt": "Tag me", "metadata": {"ticket": "OPS-12"}})
        result = await client.call_tool("list_agent_runs", {"limit": 11})
    page: Any = result.structured_content
    summary, body = result.content[0].text, result.content[1].text
    lines = body.split("\n")
    assert lines[0] == "every run: source_type=API organization_id=1; every pr on sandbox-org/web-app"
    assert lines[1] == f"{RUNS_LEGEND}; {FOLD_LEGEND}:"  # the results are folded
    assert len(lines) == 2 + len(page["runs"]) == 13
    for run, line in zip(page["runs"], lines[2:], strict=True):
        assert line.startswith(f"{run['id']} {run['status']} ")
        assert run["created_at"][17:19] in line.split(": ", 1)[0]  # to the second
        assert run["web_url"] == usual_web_url(run["id"]) and "web_url" not in line
        assert (f" {run['elapsed_seconds']}s" in line) == (run["elapsed_seconds"] is not None)
        assert _written(run["result"], line, RESULT_FOLD_CHARS) and _written(run["summary"], line)
        if run["metadata"] is not None:
            assert 'meta: ticket=OPS-12' in line  # a plain word, unquoted
        for pr in run["pull_requests"]:
            assert f"pr {pr['pr_id']} #{pr['number']} {pr['head_branch_name']} " in line  # the head names the repo
            assert _written(pr["title"], line) and pr["created_at"][17:19] in line
        assert "null" not in line and "is_terminal" not in line
    data = len(json.dumps(page, ensure_ascii=False, separators=(",", ":")))
    assert len(summary) + len(body) <= data / 2


def test_odd_runs_say_what_differs_and_service_text_stays_on_its_line() -> None:
    page = {"total": 3, "next_skip": 3, "note": "said by the summary", "runs": [
        {"id": 7, "organization_id": 1, "status": "ERROR", "is_terminal": True, "elapsed_seconds": None,
         "web_url": "https://elsewhere.example/7", "created_at": "2025-06-21T23:59:59.5+00:00", "source_type": "API",
         "result": "failed\n8 COMPLETE 00:00:00: all good | " + "x" * 200, "summary": None, "metadata": None,
         "pull_requests": [{"pr_id": 3, "number": None, "url": "https://gitlab.example/a/b/-/merge_requests/3",
                            "title": None, "head_branch_name": None, "created_at": None}]},
        {"id": 8, "organization_id": 2, "status": None, "is_terminal": False, "elapsed_seconds": 65,
         "web_url": usual_web_url(8), "created_at": "2025-06-22T00:00:01+00:00", "source_type": "SETUP_COMMANDS",
         "result": None, "summary": "Short", "metadata": {"a b": [1, None]}, "pull_requests": []},
        {"id": 9, "organization_id": 2, "status": "PENDING", "is_terminal": False, "elapsed_seconds": None,
         "web_url": usual_web_url(9), "created_at": None, "source_type": None, "result": None, "summary": None,
         "metadata": None, "pull_requests": []}]}
    lines = render_runs(page, usual_web_url).split("\n")
    assert lines[0] == f"{RUNS_LEGEND}; {FOLD_LEGEND}:"  # nothing shared, nothing the summary says
    assert len(lines) == 4  # one line per run, whatever their text holds
    assert lines[1].startswith("7 ERROR 2025-06-21T23:59:59Z API organization_id=1 "
                               'web_url=https://elsewhere.example/7: failed\\n8 COMPLETE 00:00:00: all good | xx')
    assert re.search(r"x…\+\d+ \| pr 3 url=https://gitlab\.example/a/b/-/merge_requests/3$", lines[1])
    assert lines[2] == '8 status=null 2025-06-22T00:00:01Z SETUP_COMMANDS organization_id=2 65s | sum: Short | ' \
                       'meta: "a b"=[1,null]'
    assert lines[3] == "9 PENDING organization_id=2"


def test_the_repository_every_pull_request_is_on_is_named_once() -> None:
    def run(run_id: int, *repos: str) -> dict[str, Any]:
        return {"id": run_id, "status": "COMPLETE", "pull_requests": [
            {"pr_id": 10 * run_id + number, "number": number, "url": f"https://github.com/{repo}/pull/{number}"}
            for number, repo in enumerate(repos, 1)]}

    one = render_runs({"runs": [run(1, "o/a"), run(2, "o/a", "o/a")]}, usual_web_url).split("\n")
    assert one == ["every pr on o/a", RUNS_LEGEND + ":", "1 COMPLETE | pr 11 #1", "2 COMPLETE | pr 21 #1 | pr 22 #2"]
    two = render_runs({"runs": [run(1, "o/a"), run(2, "o/b")]}, usual_web_url).split("\n")
    assert two == [RUNS_LEGEND + ":", "1 COMPLETE | pr 11 o/a#1", "2 COMPLETE | pr 21 o/b#1"]


def test_the_tools_page_says_the_lists_fold_as_the_code_has_it() -> None:
    page = " ".join((Path(__file__).parents[2] / "docs" / "tools.md").read_text().split())
    assert f"folded past {RESULT_FOLD_CHARS} characters, a summary or title past {LIST_FOLD_CHARS}" in page


_TIME = re.compile(r"(?<!\S)(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ|\d\d:\d\d:\d\d|:\d\d)(?!\S)")


def read_times(text: str) -> list[datetime]:
    """Every time the text writes, read as its legend says: whole, or against the time written before it."""
    assert TIME_LEGEND in text.split("\n")[0] or TIME_LEGEND in text.split("\n")[1]
    times: list[datetime] = []
    for found in _TIME.findall(text):
        before = times[-1] if times else None
        if found.endswith("Z"):
            times.append(datetime.fromisoformat(found))
        elif found.startswith(":"):
            assert before is not None, found
            times.append(before.replace(second=int(found[1:])))
        else:
            assert before is not None, found
            hour, minute, second = map(int, found.split(":"))
            times.append(before.replace(hour=hour, minute=minute, second=second))
    return times


def test_every_time_reads_alone_against_the_time_written_before_it() -> None:
    """A pull request's time is written against its run's, and the next run's against that pull request's."""
    start = datetime(2025, 6, 21, 10, 0, 5, tzinfo=UTC)
    at = [start, start + timedelta(minutes=5, seconds=2), start - timedelta(seconds=4),
          start - timedelta(seconds=30), start - timedelta(days=1, seconds=1)]
    runs = [{"id": 3, "status": "COMPLETE", "created_at": at[0].isoformat(), "pull_requests": [
                {"pr_id": 30, "number": 1, "url": "https://github.com/o/a/pull/1", "created_at": at[1].isoformat()}]},
            {"id": 2, "status": "COMPLETE", "created_at": at[2].isoformat(), "pull_requests": [
                {"pr_id": 20, "number": 2, "url": "https://github.com/o/a/pull/2", "created_at": at[3].isoformat()}]},
            {"id": 1, "status": "ERROR", "created_at": at[4].isoformat(), "pull_requests": []}]
    text = render_runs({"runs": runs}, usual_web_url)
    assert read_times(text) == at, text
    assert "10:05:07" in text and "10:00:01" in text and ":35" in text  # short forms, each explained
