"""A refusal's shown message reads as a sentence without misspelling the names it starts with."""

from __future__ import annotations

import pytest

from agent_automation_mcp.remote.refusals import refusal


@pytest.mark.parametrize(("message", "shown"), [
    ("create_agent_run changes things", "create_agent_run changes things."),  # a tool's name, as it is spelt
    ("X-MCP-Toolsets: unknown toolset", "X-MCP-Toolsets: unknown toolset."),
    ("this API token belongs to none", "This API token belongs to none."),
    ("sign-ins cannot be checked just now", "Sign-ins cannot be checked just now."),
])
def test_the_first_word_is_capitalised_only_when_it_is_a_plain_word(message: str, shown: str) -> None:
    body = refusal(403, message, "Do this.").body
    assert body["error"]["message"] == f"{shown} Do this."
    assert body["error"]["data"]["message"] == message  # the one error shape keeps it as written
