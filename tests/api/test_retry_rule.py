"""The transport's one retry rule, stated as a table over every operation and every way an attempt ends."""

from __future__ import annotations

import pytest

from agent_automation_mcp.api.operations import OPERATIONS
from agent_automation_mcp.api.transport import Kind, may_send_again


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_a_request_is_sent_again_only_when_that_cannot_do_anything_twice(name: str) -> None:
    op = OPERATIONS[name]
    again = {kind for kind in Kind if may_send_again(op, kind)}
    # Never left, or refused by the limiter before any work: always. May have arrived: only if repeatable.
    assert again == {Kind.UNSENT, Kind.THROTTLED} | ({Kind.LOST, Kind.SERVER_ERROR} if op.retry_safe else set())
    if not op.read_only and not op.idempotent:  # creates something: never blindly
        assert again == {Kind.UNSENT, Kind.THROTTLED}


def test_every_read_is_retry_safe_and_creating_a_run_is_not() -> None:
    assert all(op.retry_safe for op in OPERATIONS.values() if op.read_only)
    assert not OPERATIONS["create_agent_run"].retry_safe
    assert not may_send_again(OPERATIONS["create_agent_run"], Kind.LOST)
