"""Fuzz benchmark: ≥ 10,000 calls with generated arguments to every tool through a real MCP client.

    .venv/bin/python benchmarks/fuzz.py [--calls 10000] [--seed N] [--write docs/benchmarks.md]

The server (all toolsets) runs in memory behind the SDK's `Client` and talks to a sandbox over loopback with
pacing out of the way. Arguments come from `tests/tools/fuzzing.py`, the strategy the suite's fuzz test uses.
Counted: crashes (an exception out of the client, or an `internal_error`), errors not in the one shape,
malformed requests (ones the sandbox had to refuse with 422), and how the calls ended.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from report import command_line, publish

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "tools"))
from fuzzing import arguments, problem  # the suite's own strategy, not a copy

from agent_automation_mcp.api.limits import DEFAULT_RATE_LIMITS, parse_rate_limits
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.server import build_server
from agent_automation_mcp.tools.registry import TOOLSETS

LIMITS = ",".join(f"{bucket}=1000000/1s" for bucket in DEFAULT_RATE_LIMITS)  # none ever binds


def run(calls: int, seed: int) -> dict[str, Any]:
    limits = parse_rate_limits(LIMITS)
    outcomes: Counter[str] = Counter()
    problems: Counter[str] = Counter()
    crashes: list[str] = []
    started = time.perf_counter()
    with SandboxServer(SandboxConfig(run_seconds=0.0, rate_limits=limits, seed=seed)) as sandbox, \
            start_blocking_portal() as portal:
        api = ApiSettings(token=sandbox.token, org_id=sandbox.org_id, base_url=sandbox.url, rate_limits=limits)
        with portal.wrap_async_context_manager(Client(build_server(api, ServerSettings(toolsets=TOOLSETS)))) as client:
            tools = {tool.name: tool.input_schema for tool in portal.call(client.list_tools).tools}
            per_tool = -(-calls // len(tools))

            def fuzz(name: str, schema: dict[str, Any]) -> None:
                @settings(max_examples=per_tool, deadline=None, database=None, suppress_health_check=list(HealthCheck))
                @given(st.data())
                def call(data: st.DataObject) -> None:
                    args = data.draw(arguments(schema))
                    try:
                        result = portal.call(client.call_tool, name, args)
                    except Exception as exc:  # a crash is counted, not a reason to stop
                        crashes.append(f"{name}: {type(exc).__name__}")
                        return
                    error = (result.structured_content or {}).get("error") if result.is_error else None
                    outcomes["ok" if not result.is_error else error.get("kind", "?") if isinstance(error, dict)
                             else "unshaped"] += 1
                    if (found := problem(result)) is not None:
                        problems["crash" if found.startswith("a crash") else "not in the one shape"] += 1

                call()

            for index, (name, schema) in enumerate(tools.items()):
                random.seed(seed + index)
                fuzz(name, schema)
            malformed = sum(1 for record in sandbox.request_log if record.status == 422)
            requests = len(sandbox.request_log)
    return {"calls": sum(outcomes.values()) + len(crashes), "tools": len(tools), "crashes": len(crashes),
            "crash_list": crashes[:5], "problems": dict(problems), "malformed": malformed, "requests": requests,
            "outcomes": outcomes, "seconds": time.perf_counter() - started}


def section(result: dict[str, Any], argv: list[str] | None) -> str:
    outcomes = ", ".join(f"{kind} {count:,}" for kind, count in result["outcomes"].most_common())
    crashes = result["crashes"] + result["problems"].get("crash", 0)
    return "\n".join([
        "## Fuzzing",
        "",
        f"Produced by `{command_line('fuzz.py', argv)}` (2 cores): arguments generated from each tool's input "
        "schema (near and past its bounds, any JSON, misspelt names; `tests/tools/fuzzing.py`) sent to every tool "
        "of every toolset through the SDK's `Client`, in memory, against a sandbox over loopback.",
        "",
        "| calls | tools | crashes | errors not in the one shape | malformed requests (422 from the sandbox) "
        "| requests sent | time |",
        "|---|---|---|---|---|---|---|",
        f"| {result['calls']:,} | {result['tools']} | {crashes} "
        f"| {result['problems'].get('not in the one shape', 0)} | {result['malformed']} | {result['requests']:,} "
        f"| {result['seconds']:.0f} s |",
        "",
        f"How the calls ended: {outcomes}.",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--write", type=Path, help="rewrite this section of a markdown report")
    args = parser.parse_args(argv)
    result = run(args.calls, args.seed)
    publish(section(result, argv), args.write)
    if result["crash_list"]:
        print("first crashes:", *result["crash_list"], sep="\n  ", file=sys.stderr)
    return 1 if result["crashes"] or result["problems"] or result["malformed"] else 0


if __name__ == "__main__":
    sys.exit(main())
