"""The fault matrix: every write tool against every fault the sandbox can play, over loopback.

Whatever happens, a call sends a request that creates or changes something at most once (a 429 may be
sent again: the limiter refused it before any work), and the model is told exactly what is known.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Final

import anyio
import pytest
from mcp import Client

from agent_automation_mcp.api.limits import DEFAULT_RATE_LIMITS, parse_rate_limits
from agent_automation_mcp.api.operations import OPERATIONS
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.pacing import sliding_log
from agent_automation_mcp.sandbox import Faults, SandboxConfig, SandboxServer
from agent_automation_mcp.sandbox.state import RequestRecord
from agent_automation_mcp.server import build_server
from agent_automation_mcp.tools.registry import TOOLSETS
from catalogue import CASES

LIMITS: Final = ",".join(f"{bucket}=10000/1s" for bucket in DEFAULT_RATE_LIMITS)  # none ever binds
TIMEOUT: Final = 0.5

WRITES: Final = {case.name: case for case in CASES if not case.read_only}
# Each fault: the sandbox's switches, and whether the service acted on the request.
FAULTS: Final[dict[str, tuple[dict[str, float], bool]]] = {
    "5xx": ({"error_rate": 1.0}, False), "429": ({"throttle_rate": 1.0}, False),
    "timeout": ({"latency": 1.5 * TIMEOUT}, True), "reset": ({"drop_rate": 1.0}, True),
    "malformed": ({"malformed_rate": 1.0}, True), "redirect": ({"redirect_rate": 1.0}, False),
    "empty_202": ({"empty_rate": 1.0}, True), "slow": ({"latency": TIMEOUT / 5}, True),
}


def _operations(tool: str) -> list[str]:
    """The tool's writes: the faults hit them (a read it makes first, e.g. to match a name, is answered as usual)."""
    return [op for op in WRITES[tool].sends if not OPERATIONS[op].read_only]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module-wide, so one server and client serve the whole matrix


@pytest.fixture(scope="module", autouse=True)
def short_pauses() -> Iterator[None]:
    """A 429's pause at a twentieth of its floor (1 s): each tool's three retries would wait 3 s, 39 s in all."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sliding_log, "MIN_PAUSE", 0.05)
        yield


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(run_seconds=1.0, rate_limits=parse_rate_limits(LIMITS))) as server:
        yield server


@pytest.fixture(scope="module")
async def client(sandbox: SandboxServer) -> AsyncIterator[Client]:
    api = ApiSettings(token=sandbox.token, org_id=sandbox.org_id, base_url=sandbox.url, timeout=TIMEOUT,
                      rate_limits=parse_rate_limits(LIMITS))
    async with Client(build_server(api, ServerSettings(toolsets=TOOLSETS))) as connected:
        yield connected


async def _settled(sandbox: SandboxServer, operations: list[str], acted: bool) -> list[RequestRecord]:
    """The requests the service saw, once a slow one has been answered (bounded: a few seconds)."""
    with anyio.move_on_after(4 * TIMEOUT):
        while acted and not any(r.status is not None or r.fault == "drop" for r in _seen(sandbox, operations)):
            await anyio.sleep(0.05)
    return _seen(sandbox, operations)


def _seen(sandbox: SandboxServer, operations: list[str]) -> list[RequestRecord]:
    return [r for r in sandbox.request_log if r.operation in operations]


@pytest.mark.anyio
@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("tool", WRITES)
async def test_a_write_is_sent_at_most_once_and_reported_as_it_is(sandbox: SandboxServer, client: Client, tool: str,
                                                                  fault: str) -> None:
    switches, acted = FAULTS[fault]
    operations = _operations(tool)
    repeatable = all(OPERATIONS[op].retry_safe for op in operations)  # the check-suite PUT
    idempotent = all(OPERATIONS[op].idempotent for op in operations)
    sandbox.request_log.clear()
    sandbox.faults.__dict__.update(Faults(**switches, operations=frozenset(operations)).__dict__)
    try:
        result = await client.call_tool(tool, WRITES[tool].call)
        seen = await _settled(sandbox, operations, acted)
    finally:
        sandbox.faults.__dict__.update(Faults().__dict__)

    handled = [r for r in seen if r.fault not in {"error", "throttle", "redirect"}]
    if fault == "429":
        assert len(seen) >= 2 and {r.status for r in seen} == {429}  # sent again after the wait, never handled
    elif not repeatable:
        assert len(seen) == 1, [(r.status, r.fault) for r in seen]
    assert len(handled) == (1 if acted and not repeatable else len(handled))
    if not acted:
        assert handled == []

    if fault == "slow":
        assert not result.is_error, result.content[0].text
        return
    assert result.is_error, f"{tool} reported success under {fault}"
    error = result.structured_content["error"]
    text = result.content[0].text
    expected = {
        "5xx": ("server_error", 500) if repeatable else ("outcome_unknown", 500),
        "429": ("rate_limited", 429),
        "timeout": ("timeout", None) if repeatable else ("outcome_unknown", None),
        "reset": ("connection", None) if repeatable else ("outcome_unknown", None),
        "malformed": ("bad_response", 200) if repeatable else ("outcome_unknown", 200),
        "redirect": ("unexpected_status", 307),
        "empty_202": ("bad_response", 202) if repeatable else ("outcome_unknown", 202),
    }[fault]
    assert (error["kind"], error["status"]) == expected, text
    assert "200" not in text or expected[1] == 200  # never a success status that was not the one answered
    if fault == "429":
        assert error["retry_after_seconds"] is not None
    if fault == "redirect":
        assert "https://moved.invalid/" in error["hint"] and "AGENT_AUTOMATION_BASE_URL" in error["hint"]
    if error["kind"] == "outcome_unknown":
        if idempotent:
            assert "repeating the same call is safe" in error["hint"]
        else:
            assert "Check with a get or list call" in error["hint"]
