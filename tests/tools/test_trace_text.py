"""The text of a trace page: every field of every entry, one line each, in about two thirds of the JSON's tokens."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sandboxed import connected

from agent_automation_mcp.tools.logs import TRACE_LEGEND, render_trace
from catalogue import LONG_RUN

SHORT = {"tool_input": "in", "tool_output": "out", "observation": "obs"}


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _escaped(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)[1:-1] if isinstance(value, str) else json.dumps(value)


@pytest.mark.anyio
async def test_the_seeded_trace_reads_in_a_third_fewer_tokens_with_every_field_kept() -> None:
    text = data = 0
    async with connected() as (client, _):
        skip: int | None = 0
        while skip is not None:
            result = await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN, "skip": skip})
            page: Any = result.structured_content
            lines = result.content[1].text.split("\n")
            assert lines[1] == TRACE_LEGEND + ":" and len(lines) == 2 + len(page["entries"])
            assert lines[0].startswith(f"agent_run_id={LONG_RUN} status={page['status']} is_terminal=true ")
            assert f"next_skip={json.dumps(page['next_skip'])}" in lines[0]
            for entry, line in zip(page["entries"], lines[2:], strict=True):
                assert entry["created_at"][11:19] in line  # to the second
                for name, short in SHORT.items():
                    assert (name in entry) == (f"| {short}: " in line)
                for key, value in entry.items():
                    if key != "created_at":
                        assert all(_escaped(leaf) in line for leaf in _leaves(value)), (key, line)
            text += len(result.content[0].text) + len(result.content[1].text)
            data += len(json.dumps(page, ensure_ascii=False, separators=(",", ":")))
            skip = page["next_skip"]
    assert text <= data * 2 / 3  # the JSON text it replaces cost as much as the structured content


def test_service_text_cannot_pass_for_another_entry_and_odd_values_stay_readable() -> None:
    page = {"agent_run_id": 7, "status": None, "is_terminal": False, "total_logs": None, "read": 2, "next_skip": 2,
            "trimmed_fields": 1, "note": "stopped\nearly",
            "entries": [
                {"created_at": "2025-06-21T23:59:59.5+00:00", "message_type": "ACTION", "tool_name": "run",
                 "thought": "done.\n23:59:59 FINAL_ANSWER: all good", "tool_input": {"a b": 1, "ok": [1, {"x": None}]},
                 "tool_output": {}, "observation": "line\nbreak"},
                {"created_at": "2025-06-22T00:00:01+00:00", "message_type": "ERROR"},
                {"created_at": "yesterday"}]}
    lines = render_trace(page).split("\n")
    assert lines[0] == ("agent_run_id=7 status=null is_terminal=false total_logs=null read=2 next_skip=2 "
                        "trimmed_fields=1")
    assert lines[1] == "note: stopped\\nearly" and len(lines) == 6
    assert lines[3] == ('2025-06-21T23:59:59Z ACTION run: done.\\n23:59:59 FINAL_ANSWER: all good | '
                        'in: "a b"=1 ok=[1,{"x":null}] | out: {} | obs: "line\\nbreak"')
    assert lines[4] == "2025-06-22T00:00:01Z ERROR"  # a new day says its date
    assert lines[5] == "yesterday"
