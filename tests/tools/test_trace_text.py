"""The text of a trace page: every value of every entry, one line each, each value written once per result."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sandboxed import connected
from test_run_text import read_times

from agent_automation_mcp.tools.trace_text import (
    FOLD_CHARS,
    FOLD_LEGEND,
    REPEAT_CHARS,
    REPEAT_LEGEND,
    TRACE_LEGEND,
    render_trace,
)
from catalogue import LONG_RUN

FIELDS = {"thought": "thought", "tool_input": "in", "tool_output": "out", "observation": "obs"}
_MEMBER = re.compile(r"(?:^| )([A-Za-z_][A-Za-z0-9_.-]*)=")
_REPEAT = re.compile(r"#\d+")


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _escaped(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)[1:-1] if isinstance(value, str) else json.dumps(value)


def _fields(line: str) -> dict[str, str]:
    """A line's parts: `head` (time and names), `same` (=#N), `in`, `out`, `thought`, `obs`. The seeded trace's
    text holds no ` | `, and no parenthesis or `: ` in a tool's input or output."""
    head = re.match(r"\S+(?: [A-Z_]+)?(?: [a-z_]+)?", line)
    assert head is not None, line
    parts, rest = {"head": head[0]}, line[head.end():]
    if rest.startswith(" ="):
        return {**parts, "same": rest[2:]}
    if rest.startswith("("):
        parts["in"], rest = rest[1:rest.index(")")], rest[rest.index(")") + 1:]
    for start, name, ends in ((" → ", "out", (": ", " | ")), (": ", "thought", (" | ",)), (" | ", "obs", ())):
        if rest.startswith(start):
            rest = rest[len(start):]
            stop = min([rest.index(end) for end in ends if end in rest] or [len(rest)])
            parts[name], rest = rest[:stop], rest[stop:]
    assert not rest, line
    return parts


def _members(text: str) -> dict[str, str]:
    """`key=value key=value` as written (the seeded trace's values hold no ` key=` of their own)."""
    pieces = _MEMBER.split(text)
    return dict(zip(pieces[1::2], pieces[2::2], strict=True))


def _check(page: dict[str, Any], text: str, first: int) -> None:
    """Each entry's line holds each of its values, or `#N` where line N (starting `#N `) holds it in the same field
    (for an object, member by member), or `=#N` where line N holds them all."""
    lines = text.split("\n")
    legend = next(index for index, line in enumerate(lines) if line.startswith(TRACE_LEGEND))
    body = lines[legend + 1:]
    assert len(body) == len(page["entries"])
    by_position = {}
    for offset, line in enumerate(body):
        if line.startswith("#"):
            mark, line = line.split(" ", 1)
            assert mark == f"#{first + offset}"
        by_position[first + offset] = _fields(line)
    for offset, entry in enumerate(page["entries"]):
        fields = by_position[first + offset]
        assert entry["created_at"][17:19] in fields["head"]  # to the second
        if "same" in fields:
            assert _REPEAT.fullmatch(fields["same"]) and fields["head"].split(" ", 1)[1:] == by_position[int(
                fields["same"][1:])]["head"].split(" ", 1)[1:]
            fields = by_position[int(fields["same"][1:])]
        for key, short in FIELDS.items():
            if key not in entry:
                assert short not in fields
                continue
            written = fields[short]
            if _REPEAT.fullmatch(written):  # a repeat: the value is on that line, in the same field
                written = by_position[int(written[1:])][short]
            if not isinstance(entry[key], dict) or not entry[key]:
                assert all(_escaped(leaf) in written for leaf in _leaves(entry[key])), (key, written)
                continue
            members = _members(written)
            assert list(members) == list(entry[key])
            for member, value in entry[key].items():
                text = members[member]
                if _REPEAT.fullmatch(text):
                    text = _members(by_position[int(text[1:])][short])[member]
                assert all(_escaped(leaf) in text for leaf in _leaves(value)), (key, member, text)


@pytest.mark.anyio
async def test_the_seeded_trace_reads_in_half_the_tokens_of_its_json_with_every_value_kept() -> None:
    text = data = 0
    async with connected() as (client, _):
        skip: int | None = 0
        while skip is not None:
            result = await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN, "skip": skip})
            page: Any = result.structured_content
            summary, body = result.content[0].text, result.content[1].text
            assert body.split("\n")[0] == "is_terminal=true"  # what the summary says is not said again
            assert f"run {LONG_RUN}" in summary and "COMPLETE" in summary and f"of {page['total_logs']}" in summary
            assert REPEAT_LEGEND in body and FOLD_LEGEND not in body  # the seeded values are all short
            _check(page, body, skip)
            text += len(summary) + len(body)
            data += len(json.dumps(page, ensure_ascii=False, separators=(",", ":")))
            skip = page["next_skip"]
    assert text <= data / 2  # the JSON text it replaces cost as much as the structured content


@pytest.mark.anyio
async def test_a_long_value_is_folded_with_the_way_to_read_it_whole() -> None:
    prompt = "Also check the migration: " + "step by step, " * 60
    async with connected() as (client, _):
        await client.call_tool("resume_agent_run", {"agent_run_id": LONG_RUN, "prompt": prompt})
        for reverse in (False, True):
            result = await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN, "skip": 0 if reverse
                                                                   else 200, "limit": 100, "reverse": reverse})
            body = result.content[1].text
            (line,) = [line for line in body.split("\n") if "Also check the migration" in line]
            assert FOLD_LEGEND in body and line.startswith("#250 ")  # its skip from the oldest, either way
            cut = re.search(r' \| ("Also check[^|]*)…\+(\d+)$', line)
            assert cut is not None and len(cut[1]) <= FOLD_CHARS and int(cut[2]) == len(json.dumps(prompt)) - len(
                cut[1])
        whole = await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN, "skip": 250, "limit": 1})
        assert json.dumps(prompt) in whole.content[1].text and "…+" not in whole.content[1].text


def test_service_text_cannot_pass_for_another_entry_or_a_repeat_and_odd_values_stay_readable() -> None:
    page = {"agent_run_id": 7, "status": None, "is_terminal": False, "total_logs": None, "read": 4, "next_skip": 4,
            "trimmed_fields": 1, "note": "stopped\nearly", "digest": None,
            "entries": [
                {"created_at": "2025-06-21T23:59:59.5+00:00", "message_type": "ACTION", "tool_name": "run",
                 "thought": "done.\n23:59:59 FINAL_ANSWER: all good", "tool_input": {"a b": 1, "ok": [1, {"x": None}]},
                 "tool_output": {}, "observation": "line\nbreak, long enough to be written once"},
                {"created_at": "2025-06-22T00:00:01+00:00", "message_type": "ERROR", "thought": "#0",
                 "observation": "line\nbreak, long enough to be written once"},
                {"created_at": "2025-06-22T00:00:03+00:00", "message_type": "ERROR",
                 "thought": "a" * 239 + "\\" + "b" * 60},
                {"created_at": "#1 yesterday"}]}
    lines = render_trace(page, [0, 1, 2, 3], note_said=False).split("\n")
    assert lines[0] == "is_terminal=false trimmed_fields=1"  # no null, nothing the summary says
    assert lines[1] == "note: stopped\\nearly" and len(lines) == 7
    assert lines[2] == f"{TRACE_LEGEND}; {REPEAT_LEGEND}; {FOLD_LEGEND}:"
    assert lines[3] == ('#0 2025-06-21T23:59:59Z ACTION run("a b"=1 ok=[1,{"x":null}]) → {}: done.\\n23:59:59 '
                        'FINAL_ANSWER: all good | "line\\nbreak, long enough to be written once"')
    assert lines[4] == '2025-06-22T00:00:01Z ERROR: "#0" | #0'  # a new day says its date; a thought "#0" quoted
    assert lines[5] == "#2 :03 ERROR: " + "a" * 239 + "…+62"  # never half an escape
    assert lines[6] == '"#1 yesterday"'  # an unreadable time, quoted: it cannot pass for a line's #N
    assert render_trace(page, note_said=True).split("\n")[1] == TRACE_LEGEND + ":"  # no positions: as written


def test_repeats_name_only_what_a_line_shows_whole_and_plain_words_are_never_misread() -> None:
    path = "src/app/a_rather_long_module.py"  # a plain word, long enough to be written once
    long = "yes " * 75  # 300 characters, quoted
    at = "2025-06-21T10:00:0{}+00:00"
    entries = [
        {"created_at": at.format(0), "message_type": "ACTION", "tool_name": "view_file",
         "tool_input": {"filepath": path, "limit": 5}, "tool_output": {"content": long}},
        {"created_at": at.format(1), "message_type": "ACTION", "tool_name": "edit_file",
         "tool_input": {"filepath": path, "flag": "true", "nil": "None", "n": "12", "ref": "#3", "spaced": "a b",
                        "x": "y:", "url": "https://x.example/a"}, "tool_output": {"content": long}},
        {"created_at": at.format(2), "message_type": "ACTION", "tool_name": "view_file",
         "tool_input": {"filepath": path, "limit": 5}, "tool_output": {"content": long}},
        {"created_at": at.format(3), "message_type": "PLAN_EVALUATION", "thought": "a | obs: b"}]
    lines = render_trace({"entries": entries}, [10, 11, 12, 13]).split("\n")
    folded = f'content="{long[:231]}…+70'  # `content="` and 231 characters: the 240 a value keeps
    assert lines[1] == f"#10 2025-06-21T10:00:00Z ACTION view_file(filepath={path} limit=5) → {folded}"
    # The path is on line 10 whole: repeated. The content is folded there: written again, never `#10`.
    assert lines[2] == ('#11 :01 ACTION edit_file(filepath=#10 flag="true" nil="None" n="12" ref="#3" spaced="a b" '
                        f'x="y:" url=https://x.example/a) → {folded}')
    assert lines[3] == ":02 ACTION view_file =#10"  # every value as on line 10
    assert lines[4] == ':03 PLAN_EVALUATION: "a | obs: b"'  # a thought that holds the separator is quoted


def test_the_tools_page_says_the_texts_bounds_as_the_code_has_them() -> None:
    page = " ".join((Path(__file__).parents[2] / "docs" / "tools.md").read_text().split())
    assert f"an object, of {REPEAT_CHARS} characters or more" in page and f"longer than {FOLD_CHARS} characters" in page


def test_every_time_of_a_trace_reads_alone_by_its_legend() -> None:
    start = datetime(2025, 6, 21, 23, 58, 50, tzinfo=UTC)
    at = [start + timedelta(seconds=seconds) for seconds in (0, 5, 75, 76, 3600 * 3)]
    page = {"agent_run_id": 7, "entries": [{"created_at": moment.isoformat(), "message_type": "ACTION"}
                                           for moment in at]}
    text = render_trace(page, list(range(len(at))))
    assert read_times(text) == at, text
    assert "\n:55 ACTION\n" in text and "\n02:58:50 ACTION" in text  # short forms, which the legend explains
