"""What a conversation pays in context: the default `tools/list`, and the sandbox's seeded 250-entry trace.

    .venv/bin/python benchmarks/tokens.py [--before SRC] [--write docs/benchmarks.md]

The SDK's `Client` in memory against our server, which talks to a sandbox over loopback. The trace (run 409, the
seeded long trace) is read page by page (100 entries); text is what a host that shows a model only the content
blocks passes on (the summary and the text after it), structured is the structured content's compact JSON.
Tokens are chars / 4. With `--before SRC` the same is measured on another source tree's code (e.g. `git archive
main src | tar -x -C /tmp/main`), in a process of its own.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from mcp import Client
from report import before_and_after

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.server import build_server

LONG_RUN = 409  # the sandbox's seeded run with a long trace (`large_run_log_entries`, 250)
LIMITS = "standard=100000/30s,logs=100000/60s"  # far above what this reads: nothing waits


def _chars(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


async def measure() -> dict[str, int]:
    async with SandboxServer(SandboxConfig()) as sandbox:
        api = ApiSettings(token=sandbox.token, org_id=sandbox.org_id, base_url=sandbox.url,
                          rate_limits=parse_rate_limits(LIMITS))
        async with Client(build_server(api, ServerSettings())) as client:
            listed = await client.list_tools()
            tools = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in listed.tools]
            found = {"list": _chars(tools), "output_schemas": sum(_chars(t.get("outputSchema")) for t in tools),
                     "entries": 0, "text": 0, "structured": 0}
            skip: int | None = 0
            while skip is not None:
                result = await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN, "skip": skip})
                page: Any = result.structured_content
                found["entries"] += len(page["entries"])
                found["text"] += sum(len(block.text) for block in result.content if block.type == "text")
                found["structured"] += _chars(page)
                skip = page["next_skip"]
    return found


def render(rows: dict[str, dict[str, int]], command: str) -> str:
    lines = ["## Context cost: tools/list and traces", "",
             f"Produced by `{command}`: the SDK's `Client` in memory against the server, which talks to a sandbox "
             f"over loopback. The seeded 250-entry trace (run {LONG_RUN}) is read page by page (100 entries). "
             "**text**: what a host that shows a model only the content blocks passes on (the one-line summary and "
             "the text after it); **structured**: the structured content's compact JSON. Tokens are chars / 4; "
             "`tools/list` is the default toolsets' list, compact JSON.",
             "", "| code | tools/list | of it output schemas | trace: tokens per entry, text | structured |",
             "|---|---|---|---|---|"]
    for name, row in rows.items():
        lines.append(f"| {name} | {row['list']:,} chars ≈ {row['list'] // 4:,} tokens | {row['output_schemas']:,} "
                     f"chars | {row['text'] / 4 / row['entries']:.1f} ({row['text'] // 4:,} tokens for "
                     f"{row['entries']}) | {row['structured'] / 4 / row['entries']:.1f} |")
    lines += [
        "", "### Reading the numbers", "",
        "- `tools/list`: a definition used once is written where it is used; input schemas keep every bound and "
        "description. Output schemas are outlines: the names a result holds, nested as it holds them, without "
        "types, `required` lists or nullable branches (a model reads those off the value; they were a third of "
        "the list). Annotations at the protocol's defaults (`readOnlyHint: false`, `openWorldHint: true`) are "
        "left out. A client that honours the cache hints (`ttlMs` one hour) does not fetch it again within the "
        "hour.",
        "- Results other than traces keep their JSON text after the summary: several hosts pass a model only the "
        "content blocks, and the protocol asks for it for clients that ignore structured content. It is cheap "
        "to make: in a py-spy profile of `get_agent_run` over HTTP at concurrency 10, building the result "
        "(`tools/results.py`) took 2.6 % of the server's samples.",
        "- A trace page's text keeps every field of every entry and of the page (a test checks each value of the "
        "seeded trace is in its entry's line): the field names are said once in a legend line, objects are "
        "written `key=value`, times to the second (the structured content keeps them whole) with the date when it "
        "changes. Long values are trimmed as "
        "before (`--max-field-chars`); the seeded trace has none that long, so trimming plays no part here.",
    ]
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> int:
    return before_and_after("tokens.py", __doc__.splitlines()[0], measure, render, argv)


if __name__ == "__main__":
    sys.exit(main())
