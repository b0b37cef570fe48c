"""The command line: `--sandbox`, `demo`, and refusing bad settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from harness import clean_env, stdio_server
from mcp import Client
from mcp.client.stdio import stdio_client

from agent_automation_mcp.remote.hosts import is_loopback
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer

COMMAND = [sys.executable, "-m", "agent_automation_mcp"]


@pytest.mark.anyio
async def test_sandbox_flag_serves_every_tool_without_a_token() -> None:
    async with Client(stdio_server(clean_env(), "--sandbox")) as client:
        runs = await client.call_tool("list_agent_runs", {"limit": 2})
    assert not runs.is_error and len(runs.structured_content["runs"]) == 2


def test_sandbox_flag_says_so_on_stderr() -> None:
    process = subprocess.Popen([*COMMAND, "--sandbox"], env=clean_env(), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stderr.readline()  # type: ignore[union-attr]
    finally:
        process.stdin.close()  # type: ignore[union-attr]  # end of input: the server exits
        process.wait(timeout=20)
    assert "--sandbox" in line and "simulator" in line and "http://127.0.0.1:" in line
    assert process.stdout.read() == ""  # type: ignore[union-attr]  # stdout is the protocol's alone


@pytest.mark.parametrize(("args", "env", "message"), [
    (["--toolsets", "runs,nope"], {}, "unknown toolset 'nope'"),
    (["--org-id", "abc"], {}, "organisation id"),
    (["--rate-limits", "standard=lots"], {}, "bad rate-limit item"),
    (["--transport", "http", "--port", "99999"], {}, "from 1 to 65535"),
    ([], {"AGENT_AUTOMATION_TIMEOUT": "abc"}, "AGENT_AUTOMATION_TIMEOUT must be a number"),
    ([], {"AGENT_AUTOMATION_MAX_REPLICAS": "0"}, "AGENT_AUTOMATION_MAX_REPLICAS must be an integer >= 1"),
    ([], {"AGENT_AUTOMATION_READ_ONLY": "enabled"}, "AGENT_AUTOMATION_READ_ONLY must be one of 1, true, yes, on"),
    ([], {"AGENT_AUTOMATION_BASE_URL": "http://api.example.com"}, "clear text; use https://"),
    (["--base-url", "http://10.0.0.5:8080"], {}, "clear text; use https://"),
    (["--base-url", "https://me:hunter2@api.example.com"], {}, "carries a user name or password"),
    ([], {"AGENT_AUTOMATION_BASE_URL": "https://:hunter2@api.example.com"}, "carries a user name or password"),
    ([], {"AGENT_AUTOMATION_BASE_URL": "ftp://api.example.com"}, "must be an https:// URL"),
    (["--auth", "request"], {}, "--auth request reads each HTTP request's token: it needs --transport http"),
    ([], {"AGENT_AUTOMATION_AUTH": "token"}, "the auth mode must be request, env or oauth"),
    (["--auth", "oauth"], {}, "--auth oauth reads each HTTP request's token: it needs --transport http"),
    (["--transport", "http", "--auth", "oauth"], {}, "--auth oauth needs --public-url"),
    (["--transport", "http", "--auth", "oauth", "--public-url", "http://mcp.example.com"], {},
     "--public-url must be https beyond loopback"),
    (["--transport", "http", "--auth", "oauth", "--public-url", "https://mcp.example.com/x"], {},
     "--public-url must be a scheme and host"),
    (["--transport", "http", "--auth", "oauth", "--public-url", "https://mcp.example.com"], {},
     "--auth oauth beyond loopback needs AGENT_AUTOMATION_OAUTH_KEYS"),
    (["--transport", "http", "--auth", "oauth", "--public-url", "https://mcp.example.com"],
     {"AGENT_AUTOMATION_OAUTH_KEYS": "hunter2"}, "key 1 is not a Fernet key"),
    (["--transport", "http", "--auth", "oauth", "--public-url", "https://mcp.example.com"],
     {"AGENT_AUTOMATION_OAUTH_KEYS": Fernet.generate_key().decode()},
     "--auth oauth beyond loopback needs AGENT_AUTOMATION_STATE_KEYS"),
    (["--transport", "http", "--allowed-host", "a b:x"], {}, "an allowed host is a name or name:port"),
    (["--transport", "http", "--allowed-origin", "example.com"], {}, "an allowed origin is scheme://name"),
    (["--transport", "http", "--max-body-bytes", "0"], {}, "a whole number >= 1"),
])
def test_bad_settings_exit_with_a_message(args: list[str], env: dict[str, str], message: str) -> None:
    done = subprocess.run([*COMMAND, *args], env=clean_env(**env), capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and message in done.stderr and done.stdout == ""
    assert "Traceback" not in done.stderr and "hunter2" not in done.stderr


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("localhost", True), ("::1", True), ("[::1]", True),
    ("0.0.0.0", False), ("::", False), ("192.168.1.5", False), ("mcp.example.com", False),
])
def test_listening_beyond_loopback_is_recognised_for_the_warning(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_demo_walks_through_a_session() -> None:
    done = subprocess.run([*COMMAND, "demo", "--run-seconds", "1"], env=clean_env(), capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    for step in ("list_repositories", "create_agent_run", "get_agent_run", "get_agent_run_logs", "ban_checks",
                 "unban_checks", "edit_pull_request", "update_check_suite_settings", "revoke_oauth_tokens"):
        assert f"→ {step}(" in done.stdout, step
    assert "ready_for_review" in done.stdout and "Error [not_found]" in done.stdout


@pytest.mark.anyio
async def test_the_token_never_reaches_stderr_even_at_debug_level(tmp_path: Path) -> None:
    secret = "tok-e2e-do-not-print-4242"
    stderr = tmp_path / "stderr.txt"
    async with SandboxServer(SandboxConfig(tokens=(secret,), run_seconds=0.5)) as sandbox:
        env = clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_API_TOKEN=secret)
        with stderr.open("w") as errlog:
            async with Client(stdio_client(stdio_server(env, "--log-level", "DEBUG"), errlog=errlog)) as client:
                results = [await client.call_tool("list_repositories", {}),
                           await client.call_tool("get_agent_run", {"agent_run_id": 987654}),
                           await client.call_tool("get_user", {})]
    assert not results[0].is_error and results[1].is_error
    logged = stderr.read_text()
    assert "tool get_agent_run: not_found" in logged  # the log is really at DEBUG
    assert secret not in logged and all(secret not in str(r.model_dump()) for r in results)
