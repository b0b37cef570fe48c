"""The HTTP server's event loop."""

from __future__ import annotations

import asyncio
import sys

import anyio
import pytest

from agent_automation_mcp.remote.serve import loop_options


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop is not a dependency on Windows")
def test_http_serving_runs_on_uvloop() -> None:
    async def loop_module() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert anyio.run(loop_module, backend_options=loop_options()).startswith("uvloop")
