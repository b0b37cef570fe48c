"""What a conversation pays in context: the default `tools/list`, the sandbox's 250-entry trace, digests, a run list.

    .venv/bin/python benchmarks/tokens.py [--before SRC] [--write docs/benchmarks.md]

The SDK's `Client` in memory against our server, which talks to a sandbox over loopback. The trace (run 409, the
seeded long trace) is read page by page (100 entries), and whole with `all_pages` (as many calls as it takes); a
digest (`digest: true`) is made of it and of a 10,000-entry fixture run. Text is what a host that shows a model
only the content blocks passes on (the summary and the text after it), structured is the structured content's
compact JSON. A list of runs is `list_agent_runs(limit=10)` over 10 fixture runs, each with a pull request. Tokens
are chars / 4. With `--before SRC` the same is measured on another source tree's code (e.g.
`git archive main src | tar -x -C /tmp/main`), in a process of its own; a tree without digests reports none.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import httpx2
from mcp import Client
from report import before_and_after

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.server import build_server

LONG_RUN = 409  # the sandbox's seeded run with a long trace (`large_run_log_entries`, 250)
LONGEST = 10_000  # entries of the fixture run the second digest reads
LISTED_RUNS = 10  # fixture runs made with a pull request each on WEB_APP, then listed with this limit
WEB_APP = 201  # the sandbox's seeded web-app repository
LIMITS = "standard=100000/30s,logs=100000/60s"  # far above what this reads, here and in the sandbox: nothing waits
NAMES = ("created_at", "message_type", "tool_name")  # what a line says of an entry before its values


def _chars(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _text(result: Any) -> int:
    return sum(len(block.text) for block in result.content if block.type == "text")


async def _read(client: Client, arguments: dict[str, Any]) -> tuple[int, int, int, int, int]:
    """Calls from skip 0 to the end of the trace: (calls, entries, text chars, structured chars, and the text chars
    of the same pages were their entries only a time, a type and a tool: what a line per step costs at least)."""
    from agent_automation_mcp.tools.trace_text import render_trace  # of the tree measured

    calls = entries = text = structured = bare = 0
    skip: int | None = 0
    while skip is not None:
        result = await client.call_tool("get_agent_run_logs", {**arguments, "skip": skip})
        page: Any = result.structured_content
        calls, entries, text = calls + 1, entries + len(page["entries"]), text + _text(result)
        structured += _chars(page)
        named = [{key: entry[key] for key in NAMES if key in entry} for entry in page["entries"]]
        bare += len(result.content[0].text) + len(render_trace({**page, "entries": named},
                                                               range(skip, skip + len(named))))
        skip = page["next_skip"]
    return calls, entries, text, structured, bare


def _runs_bare(result: Any) -> int:
    """The list's text were its runs without a result, a summary or titles."""
    from agent_automation_mcp.tools.run_text import render_runs  # of the tree measured
    from agent_automation_mcp.tools.runs import usual_web_url

    page = result.structured_content
    runs = [{**run, "result": None, "summary": None,
             "pull_requests": [{**pr, "title": None} for pr in run["pull_requests"]]} for run in page["runs"]]
    return len(result.content[0].text) + len(render_runs({**page, "runs": runs}, usual_web_url))


async def _digest(client: Client, run_id: int) -> int | None:
    """The digest's text in chars, or None where the code has no digest (the tool refuses the argument)."""
    result = await client.call_tool("get_agent_run_logs", {"agent_run_id": run_id, "digest": True})
    return None if result.is_error else _text(result)


async def measure() -> dict[str, Any]:
    limits = parse_rate_limits(LIMITS)
    async with SandboxServer(SandboxConfig(rate_limits=limits)) as sandbox:
        longest = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={"log_entries": LONGEST}).json()["id"]
        for number in range(LISTED_RUNS):
            httpx2.post(f"{sandbox.url}/_sandbox/runs", json={
                "repo_id": WEB_APP, "with_pull_request": True, "prompt": f"Fix the flaky test in module {number}"})
        api = ApiSettings(token=sandbox.token, org_id=sandbox.org_id, base_url=sandbox.url, rate_limits=limits)
        async with Client(build_server(api, ServerSettings())) as client:
            listed = await client.list_tools()
            tools = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in listed.tools]
            found: dict[str, Any] = {"list": _chars(tools),
                                     "output_schemas": sum(_chars(t.get("outputSchema")) for t in tools)}
            _, found["entries"], found["text"], found["structured"], _ = await _read(client, {"agent_run_id": LONG_RUN})
            found["whole_calls"], _, found["whole_text"], _, found["whole_bare"] = await _read(
                client, {"agent_run_id": LONG_RUN, "all_pages": True})
            listed_runs = await client.call_tool("list_agent_runs", {"limit": LISTED_RUNS})
            found["runs_text"], found["runs_structured"] = _text(listed_runs), _chars(listed_runs.structured_content)
            found["runs_bare"] = _runs_bare(listed_runs)
            found["digest"] = await _digest(client, LONG_RUN)
            found["digest_longest"] = await _digest(client, longest)
    return found


def _tokens(chars: int | None) -> str:
    return "none" if chars is None else f"{chars // 4:,}"


def render(rows: dict[str, dict[str, Any]], command: str) -> str:
    # This tree's figures (imported here: a measurement of an older tree runs without these modules).
    from agent_automation_mcp.tools.run_text import LIST_FOLD_CHARS, RESULT_FOLD_CHARS
    from agent_automation_mcp.tools.trace_digest import DIGEST_TOKENS
    from agent_automation_mcp.tools.trace_text import FOLD_CHARS, REPEAT_CHARS

    now = list(rows.values())[-1]  # this tree
    lines = ["## Context cost: tools/list and traces", "",
             f"Produced by `{command}`: the SDK's `Client` in memory against the server, which talks to a sandbox "
             f"over loopback. The seeded 250-entry trace (run {LONG_RUN}) is read page by page (100 entries), and "
             "whole with `all_pages` (one call returns about 60,000 characters of structured content at most, so it "
             f"takes more than one); its digest and that of a {LONGEST:,}-entry fixture run (`digest: true`, the rate "
             "limits far above what they read, so each reads its whole trace). **text**: what a host that shows a "
             "model only the content blocks passes on (the one-line summary and the text after it); **structured**: "
             "the structured content's compact JSON. Tokens are chars / 4; `tools/list` is the default toolsets' "
             f"list, compact JSON. Sizes do not depend on load (1-minute load average {os.getloadavg()[0]:.1f}).",
             "**bare**: the same text were the entries only a time, a type and a tool (no thought, input, output "
             "or observation), or the runs without a result, summary or titles: what a line per step or run costs "
             "before any value that tells one from another.",
             "", "| code | tools/list | of it output schemas | trace: tokens per entry, text | structured | whole "
             "250-entry trace, text (all_pages) | bare | digest, 250 entries | digest, "
             f"{LONGEST:,} entries | list_agent_runs(limit={LISTED_RUNS}), text | bare | structured |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
        lines.append(f"| {name} | {row['list']:,} chars ≈ {row['list'] // 4:,} tokens | {row['output_schemas']:,} "
                     f"chars | {row['text'] / 4 / row['entries']:.1f} ({row['text'] // 4:,} tokens for "
                     f"{row['entries']}) | {row['structured'] / 4 / row['entries']:.1f} | "
                     f"{row['whole_text'] // 4:,} tokens ({row['whole_calls']} calls) | "
                     f"{_tokens(row['whole_bare'])} | {_tokens(row['digest'])} | {_tokens(row['digest_longest'])} | "
                     f"{_tokens(row['runs_text'])} | {_tokens(row['runs_bare'])} | "
                     f"{_tokens(row['runs_structured'])} |")
    lines += [
        "", "### Reading the numbers", "",
        "- `tools/list`: a definition used once is written where it is used; input schemas keep every bound and "
        "description. Output schemas are outlines: the names a result holds, nested as it holds them, without "
        "types, `required` lists or nullable branches (a model reads those off the value; they were a third of "
        "the list). Annotations at the protocol's defaults (`readOnlyHint: false`, `openWorldHint: true`) are "
        "left out. A client that honours the cache hints (`ttlMs` one hour) does not fetch it again within the "
        "hour.",
        "- Results other than traces and lists of runs keep their JSON text after the summary: several hosts "
        "pass a model only the content blocks, and the protocol asks for it for clients that ignore structured "
        "content. It is cheap to make: in a py-spy profile of `get_agent_run` over HTTP at concurrency 10, "
        "building the result (`tools/results.py`) took 2.6 % of the server's samples.",
        "- A trace page's text keeps every value of every entry (a test checks each value of the seeded trace is "
        "in its entry's line, or in the line its `#N` or `=#N` names): the field names are said once in a legend "
        "line, a tool call is written as one (`tool(input) → output`), objects `key=value` with plain words "
        "unquoted, times to the second (`:SS` within the minute of the line above; the structured content keeps "
        "them whole); the page's fields the summary says, and nulls, are not written again; a value, or a member "
        f"of an object, of {REPEAT_CHARS} characters or more that an earlier line of the same result shows whole "
        "in the same field is written `#N` (that line's skip), and an entry whose values all repeat an earlier "
        "one's `=#N`. The seeded trace repeats much (a run's commands, outputs and messages recur), which is most "
        f"of the saving; its values are all under {FOLD_CHARS} characters, so folding plays no part here (in a "
        f"real trace, tool outputs of up to `--max-field-chars` are folded to {FOLD_CHARS} in a page of several "
        f"entries). Of the whole trace's {now['whole_text'] // 4:,} tokens, {now['whole_bare'] // 4:,} are the "
        f"bare lines (time, type, tool); the values, with their keys, are the other "
        f"{(now['whole_text'] - now['whole_bare']) // 4:,}, about "
        f"{(now['whole_text'] - now['whole_bare']) / now['entries']:.0f} "
        "characters an entry, most of them short (paths, commands, counts, verdicts, ids) and different from one "
        "entry to the next.",
        "- A list of runs is one line per run (`tools/run_text.py`): what every run shares and what the summary "
        "says are written once (the repository every pull request is on too), nulls never, a run's usual web page "
        f"and a GitHub pull request's URL in short, a run's result folded past {RESULT_FOLD_CHARS} characters and "
        f"a summary or title past {LIST_FOLD_CHARS}. Of its {now['runs_text'] // 4:,} tokens, "
        f"{now['runs_bare'] // 4:,} are the bare lines (ids, statuses, times, pull-request ids, numbers, branches, "
        f"the head and legend); the runs' results, summaries and titles are the other "
        f"{(now['runs_text'] - now['runs_bare']) // 4:,}, about "
        f"{(now['runs_text'] - now['runs_bare']) / LISTED_RUNS:.0f} characters a run.",
        f"- A digest's text is bounded by construction (each line has a share of {DIGEST_TOKENS} tokens and shows "
        "the items "
        "that fit); `tests/tools/test_trace_digest.py` checks the bound on the seeded traces, 10,000 entries and "
        "the worst text a trace can hold.",
    ]
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> int:
    return before_and_after("tokens.py", __doc__.splitlines()[0], measure, render, argv)


if __name__ == "__main__":
    sys.exit(main())
