"""A full session, successes and every kind of failure, scanned for the token: not one hit anywhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import httpx2
import pytest
from harness import RATE_LIMITS, sandbox_env, stdio_server
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import stdio_client
from mcp.types import ElicitRequestParams, ElicitResult
from scenario import call_every_tool

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from catalogue import calls

SECRET: Final = "tok-secrets-scan-7d1c0ffee42"
# Each tool once more, with arguments that reach the service, while it fails in every way it can.
CALLS: Final = calls()
FAULTS: Final = ({"error_rate": 1.0}, {"drop_rate": 1.0}, {"malformed_rate": 1.0}, {"redirect_rate": 1.0},
                 {"empty_rate": 1.0})  # 429s are in tests/tools/test_write_faults.py: each costs seconds of waiting


async def _confirm(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirm": True})


@pytest.mark.anyio
async def test_no_output_log_line_or_error_of_a_full_session_holds_the_token(tmp_path: Path) -> None:
    stderr = tmp_path / "stderr.txt"
    seen: list[Any] = []
    config = SandboxConfig(tokens=(SECRET,), run_seconds=0.5, rate_limits=parse_rate_limits(RATE_LIMITS))
    async with SandboxServer(config) as sandbox:
        env = sandbox_env(sandbox, AGENT_AUTOMATION_TOOLSETS="all", AGENT_AUTOMATION_TIMEOUT="2")
        with stderr.open("w") as errlog:
            async with Client(stdio_client(stdio_server(env, "--log-level", "DEBUG"), errlog=errlog),
                              elicitation_callback=_confirm) as client:
                call_tool = client.call_tool

                async def recorded(*args: Any, **kwargs: Any) -> Any:
                    seen.append(result := await call_tool(*args, **kwargs))
                    return result

                client.call_tool = recorded  # type: ignore[method-assign]
                seen += [client.instructions, await client.list_tools()]
                await call_every_tool(client)
                for name in CALLS:  # refused before sending, and a 404 from the service
                    await client.call_tool(name, {**CALLS[name], "agent_run_id": "4_2"} if "agent_run_id" in
                                           CALLS[name] else {**CALLS[name], "bogus": 1})
                await client.call_tool("get_agent_run", {"agent_run_id": 987654})
                for faults in FAULTS:
                    httpx2.put(f"{sandbox.url}/_sandbox/faults", json=faults).raise_for_status()
                    for name, arguments in CALLS.items():
                        await client.call_tool(name, arguments)
                httpx2.put(f"{sandbox.url}/_sandbox/faults", json={}).raise_for_status()
    results = [item for item in seen if hasattr(item, "is_error")]
    assert len(results) > 25 * (len(FAULTS) + 2) and sum(r.is_error for r in results) > 25 * len(FAULTS)
    kinds = {r.structured_content["error"]["kind"] for r in results if r.is_error}
    assert {"invalid_arguments", "not_found", "outcome_unknown", "unexpected_status", "bad_response"} <= kinds
    logged = stderr.read_text()
    assert "DEBUG" in logged or "failed:" in logged  # the log really is verbose
    everything = logged + json.dumps([item.model_dump(mode="json") if hasattr(item, "model_dump") else item
                                      for item in seen])
    assert everything.count(SECRET) == 0 and SECRET[:12] not in everything
