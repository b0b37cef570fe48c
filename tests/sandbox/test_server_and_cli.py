"""`SandboxServer` in both context-manager styles, and the command line."""

from __future__ import annotations

import argparse
import os
import selectors
import subprocess
import sys
import time

import httpx2
import pytest

from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.sandbox.cli import add_sandbox_arguments, banner, config_from_args, run_sandbox


@pytest.mark.anyio
async def test_async_with_serves_and_stops() -> None:
    async with SandboxServer(SandboxConfig(seed=1)) as sandbox:
        async with httpx2.AsyncClient(base_url=sandbox.url) as client:
            me = await client.get("/v1/users/me", headers={"Authorization": f"Bearer {sandbox.token}"})
        assert me.status_code == 200 and sandbox.url.startswith("http://127.0.0.1:") and sandbox.running
    assert not sandbox.running


def test_a_server_starts_once_and_stops_idempotently() -> None:
    server = SandboxServer()
    with pytest.raises(RuntimeError):
        _ = server.url
    with server:
        with pytest.raises(RuntimeError):
            server.start()
        assert server.state.world is server.app.state.world
    server.stop()


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_sandbox_arguments(parser)
    return parser.parse_args(argv)


def test_flags_become_a_config() -> None:
    config = config_from_args(parse("--token", "a", "--token", "b", "--org-id", "7", "--rate-limits", "logs=2/1s",
                                    "--rate-limit-algorithm", "fixed", "--no-retry-after", "--run-seconds", "2",
                                    "--seed", "9", "--logs-paths", "alpha", "--visible-orgs", "2", "--drop-rate",
                                    "0.1", "--fault-operations", "create_agent_run,get_agent_run", "--recent-runs",
                                    "128"))
    assert config.tokens == ("a", "b") and config.org_id == 7 and config.visible_org_ids == (7, 8)
    assert str(config.rate_limits["logs"]) == "2/1s" and str(config.rate_limits["standard"]) == "60/30s"
    assert (config.algorithm, config.retry_after, config.run_seconds, config.seed) == ("fixed", False, 2.0, 9)
    assert config.logs_paths == "alpha" and config.faults.drop_rate == 0.1 and config.recent_runs == 128
    assert config.faults.operations == frozenset({"create_agent_run", "get_agent_run"})
    defaults = config_from_args(parse())
    assert defaults.tokens == ("sandbox-demo-token",) and defaults.retry_after and not defaults.faults.active
    assert defaults.recent_runs == 0
    text = banner(defaults, "http://127.0.0.1:8787")
    assert ("AGENT_AUTOMATION_BASE_URL=http://127.0.0.1:8787 AGENT_AUTOMATION_API_TOKEN=sandbox-demo-token "
            "AGENT_AUTOMATION_ORG_ID=1") in text


def test_bad_flags_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_sandbox(parse("--rate-limits", "standrd=1/1s")) == 2
    assert "unknown rate-limit bucket" in capsys.readouterr().err


def read_banner(fd: int, until: str, seconds: float) -> list[str]:
    """Lines from the pipe `fd` up to the one containing `until`, waiting at most `seconds` in all."""
    text = ""
    deadline = time.monotonic() + seconds
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while until not in text or not text.endswith("\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                raise AssertionError(f"no {until!r} on stderr; got {text!r}")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise AssertionError(f"the process ended; got {text!r}")
            text += chunk.decode()
    return text.splitlines()


def test_the_command_prints_how_to_use_it_and_serves() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([sys.executable, "-m", "agent_automation_mcp.sandbox", "--port", "0", "--seed", "3"],
                               stderr=subprocess.PIPE, env=env)
    try:
        assert process.stderr is not None
        lines = read_banner(process.stderr.fileno(), until="AGENT_AUTOMATION_ORG_ID=", seconds=10)
        url = lines[0].rsplit(" ", 1)[-1].strip()
        assert url.startswith("http://127.0.0.1:") and "API token: sandbox-demo-token" in lines[1]
        assert any("AGENT_AUTOMATION_ORG_ID=1" in line for line in lines)
        deadline = time.monotonic() + 10
        while True:  # the banner comes just before the server listens
            try:
                me = httpx2.get(f"{url}/v1/users/me", headers={"Authorization": "Bearer sandbox-demo-token"})
                break
            except httpx2.ConnectError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        assert me.status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=10)
