"""The TypeScript SDK's client (`@modelcontextprotocol/sdk`, pinned in ts_client/package.json and installed by
.ci/run): it carries on when its listening GET stream is answered 405, and shows a refusal's message and hint."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from harness import HttpServer, sandbox_env

from agent_automation_mcp.sandbox import SandboxServer

PROBE: Final = Path(__file__).with_name("ts_client") / "probe.mjs"


def probe(url: str, **headers: str) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None or not (PROBE.parent / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.skip("the TypeScript SDK is not installed (npm install --prefix tests/e2e/ts_client; .ci/run does)")
    done = subprocess.run([node, str(PROBE), url, json.dumps(headers)], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def remote(sandbox: SandboxServer) -> Iterator[HttpServer]:
    server = HttpServer(sandbox_env(sandbox), "--auth", "request")
    yield server
    stderr = server.stop()
    assert "GET /mcp - 405 method_not_allowed" in stderr  # the client did try its stream, and was told no


def test_the_typescript_client_calls_on_after_its_get_stream_is_refused(remote: HttpServer,
                                                                        sandbox: SandboxServer) -> None:
    result = probe(remote.url, authorization=f"Bearer {sandbox.token}", **{"x-organization-id": str(sandbox.org_id)})
    assert result == {"calls": ["ok", "ok"], "error": None}


def test_the_typescript_client_shows_a_refusals_message_and_hint(remote: HttpServer) -> None:
    result = probe(remote.url)
    assert result["calls"] == [] and "This server needs your own API token with each request." in result["error"]
    assert "Send Authorization: Bearer <your Codegen API token>" in result["error"]
