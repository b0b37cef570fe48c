"""How long a run has gone on is never overstated: a resume restarts the clock the summary reads, and without a
known resume the time is worded as the run's age (issue 27)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from sandboxed import connected

from agent_automation_mcp.sandbox import SandboxConfig
from agent_automation_mcp.tools.runs import duration, elapsed_phrase
from catalogue import RUN_WITH_PR


@pytest.mark.anyio
async def test_a_finished_run_resumed_reads_as_resumed_not_as_going_since_its_creation() -> None:
    """The seeded run finished long ago; resumed, it is ACTIVE again with its old created_at."""
    async with connected(SandboxConfig(run_seconds=60)) as (client, _):
        resumed = await client.call_tool("resume_agent_run", {"agent_run_id": RUN_WITH_PR, "prompt": "one more"})
        read = await client.call_tool("get_agent_run", {"agent_run_id": RUN_WITH_PR})
    assert not resumed.is_error and resumed.structured_content["is_terminal"] is False
    said = resumed.content[0].text
    assert re.search(r"is ACTIVE, resumed \d+ s ago", said) and "going for" not in said, said
    assert read.structured_content["elapsed_seconds"] > 86_400  # the run's age, as documented
    assert re.search(r"is ACTIVE, created \d+ d \d+ h ago \(server clock\)", read.content[0].text), read.content[0].text


def test_the_wording_takes_the_instant_a_follower_knows() -> None:
    created = datetime.now(UTC) - timedelta(days=3)
    iso = created.isoformat()
    assert elapsed_phrase(iso) is not None and elapsed_phrase(iso).startswith("created 3 d 0 h ago")
    assert elapsed_phrase(iso, since=datetime.now(UTC) - timedelta(minutes=2)).startswith("resumed 2 min")
    assert elapsed_phrase(iso, since=created) == "going for 3 d 0 h"  # its start, not a resume
    assert elapsed_phrase(None) is None and elapsed_phrase("soon") is None
    assert duration(45_007_000) == "520 d 21 h" and duration(7_260) == "2 h 1 min"
