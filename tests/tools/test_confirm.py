"""Destructive tools ask the user first when the client can ask, in both protocol eras (in memory, real client)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, Final

import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.types import ElicitRequestParams, ElicitResult

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.api.operations import OPERATIONS
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.server import build_server
from agent_automation_mcp.tools.registry import TOOLSETS
from catalogue import BY_NAME, CASES, calls

MODES: Final = ("auto", "legacy")  # 2026-07-28 (input-required rounds) and 2025-11-25 (a request mid-call)
LIMITS: Final = "standard=10000/1s,pr_edit=10000/1s"
DESTRUCTIVE: Final = calls([case for case in CASES if case.asks_first])

@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(run_seconds=1.0, rate_limits=parse_rate_limits(LIMITS))) as server:
        yield server


class User:
    """An elicitation callback that answers as told and remembers what it was asked."""

    def __init__(self, action: str, confirm: bool = True) -> None:
        self.action, self.confirm = action, confirm
        self.asked: list[str] = []

    async def __call__(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params.message)
        content = {"confirm": self.confirm} if self.action == "accept" else None
        return ElicitResult(action=self.action, content=content)  # type: ignore[arg-type]


@pytest.fixture
async def server(sandbox: SandboxServer) -> AsyncIterator[Any]:
    api = ApiSettings(token=sandbox.token, org_id=sandbox.org_id, base_url=sandbox.url,
                      rate_limits=parse_rate_limits(LIMITS))
    yield build_server(api, ServerSettings(toolsets=TOOLSETS))


def _sent(sandbox: SandboxServer, tool: str, *, writes_only: bool = False) -> int:
    """Requests of the tool's operations (only its writes: a tool may read first, e.g. to match a name)."""
    operations = BY_NAME[tool].sends
    return sum(1 for record in sandbox.request_log if record.operation in operations
               and not (writes_only and OPERATIONS[record.operation].read_only))


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", DESTRUCTIVE)
@pytest.mark.parametrize(("action", "confirm"), [("decline", True), ("cancel", True), ("accept", False)])
async def test_a_refusal_is_cancelled_and_sends_nothing(sandbox: SandboxServer, server: Any, mode: str, tool: str,
                                                        action: str, confirm: bool) -> None:
    user = User(action, confirm)
    sandbox.request_log.clear()
    async with Client(server, mode=mode, elicitation_callback=user) as client:
        result = await client.call_tool(tool, DESTRUCTIVE[tool])
    assert result.is_error
    error = result.structured_content["error"]
    assert error["kind"] == "cancelled" and error["status"] is None and "nothing was sent" in error["hint"]
    assert set(error) == {"kind", "status", "message", "hint"}
    assert _sent(sandbox, tool) == 0
    [question] = user.asked
    assert question.endswith("Go ahead?") and question.count(". ") + question.count(": ") <= 2


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", DESTRUCTIVE)
async def test_a_confirmation_lets_the_call_through(sandbox: SandboxServer, server: Any, mode: str,
                                                    tool: str) -> None:
    user = User("accept")
    sandbox.request_log.clear()
    async with Client(server, mode=mode, elicitation_callback=user) as client:
        result = await client.call_tool(tool, DESTRUCTIVE[tool])
    assert not result.is_error, result.content[0].text
    assert len(user.asked) == 1 and _sent(sandbox, tool, writes_only=True) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_without_the_capability_nothing_is_asked(sandbox: SandboxServer, server: Any, mode: str) -> None:
    sandbox.request_log.clear()
    async with Client(server, mode=mode) as client:
        results = [await client.call_tool(tool, arguments) for tool, arguments in DESTRUCTIVE.items()]
    assert not any(result.is_error for result in results)
    assert all(_sent(sandbox, tool, writes_only=True) == 1 for tool in DESTRUCTIVE)


@pytest.mark.anyio
async def test_tools_that_are_not_destructive_never_ask(server: Any) -> None:
    user = User("decline")
    async with Client(server, elicitation_callback=user) as client:
        assert not (await client.call_tool("unban_checks", {"agent_run_id": 401})).is_error
        assert not (await client.call_tool("list_repositories", {"limit": 1})).is_error
    assert user.asked == []
