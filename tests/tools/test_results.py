"""What a result tells a model is what the service said: counts, delivery, pull-request ids, timestamps' zone."""

from __future__ import annotations

from datetime import datetime

import pytest
from sandboxed import LONG_RUN, connected

RUN_WITH_PR, PR_ID = 401, 301  # the sandbox's finished run with an open pull request on sandbox-org/web-app


def _utc(value: str) -> bool:
    return datetime.fromisoformat(value).utcoffset() is not None and value.endswith("+00:00")


@pytest.mark.anyio
async def test_timestamps_without_a_zone_come_back_as_utc_with_the_offset_said() -> None:
    async with connected() as (client, _):
        run = (await client.call_tool("get_agent_run", {"agent_run_id": RUN_WITH_PR})).structured_content
        trace = (await client.call_tool("get_agent_run_logs", {"agent_run_id": LONG_RUN, "limit": 5}))
    assert " " not in run["created_at"] and _utc(run["created_at"])  # the sandbox sends `2025-06-21 11:20:04.3`
    assert all(_utc(entry["created_at"]) for entry in trace.structured_content["entries"])
