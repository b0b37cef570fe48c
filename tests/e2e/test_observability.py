"""What an on-call engineer reads, over real HTTP: the access lines (JSON from the first line to the last), tenants
named by an HMAC shared through a secret, level and format from the environment, refusals and tool durations in
`/metrics`, and `/metrics` on its own port."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any, Final

import anyio
import httpx2
import pytest
from harness import RATE_LIMITS, HttpServer, clean_env, free_port, stdio_server
from mcp import Client
from mcp.client.stdio import stdio_client
from oauth_flow import RawFlow
from prometheus_client.parser import text_string_to_metric_families

from agent_automation_mcp.api.credentials import Credentials
from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer

ALICE, BOB = "tok-alice-observed", "tok-bob-observed"
STRANGER: Final = "tok-nobody-knows-this"
SECRET: Final = "a-deployment-secret-of-some-length"
ERA: Final = "2026-07-28"
ACCESS_FIELDS: Final = {"request_id", "http_method", "method", "tool", "outcome", "status", "duration", "tenant"}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    config = SandboxConfig(tokens=(ALICE, BOB), run_seconds=2.0, rate_limits=parse_rate_limits(RATE_LIMITS))
    with SandboxServer(config) as server:
        yield server


def env_for(sandbox: SandboxServer, **values: str) -> dict[str, str]:
    return clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS, **values)


def rpc(url: str, method: str, params: dict[str, Any] | None = None, *, token: str | None = None,
        **headers: str) -> httpx2.Response:
    """One modern-era JSON-RPC request, as a client sends it, with `headers` (`x_request_id` → `x-request-id`)."""
    meta = {"io.modelcontextprotocol/protocolVersion": ERA, "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": meta}}
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream",
            "mcp-protocol-version": ERA, "mcp-method": method}
    if method == "tools/call":
        sent["mcp-name"] = (params or {})["name"]
    if token is not None:
        sent["authorization"] = f"Bearer {token}"
    sent |= {name.replace("_", "-"): value for name, value in headers.items()}
    return httpx2.post(url, json=body, headers=sent, timeout=30)


def legacy_initialize(url: str, token: str) -> httpx2.Response:
    """A 2025-11-25 client's first request: the method is in the body only."""
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    return httpx2.post(url, json=initialize, timeout=30, headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream",
        "authorization": f"Bearer {token}"})


def call(url: str, tool: str, arguments: dict[str, Any], token: str, **headers: str) -> httpx2.Response:
    return rpc(url, "tools/call", {"name": tool, "arguments": arguments}, token=token, **headers)


def json_lines(stderr: str) -> list[dict[str, Any]]:
    """Every line the replica wrote, each of which must be a JSON object."""
    lines = []
    for line in stderr.splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            pytest.fail(f"a line that is not JSON in JSON mode: {line!r}")
    assert lines and all(isinstance(line, dict) and {"time", "level", "event"} <= set(line) for line in lines)
    return lines


def access_lines(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["event"] == "access"]


def metric_samples(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = httpx2.get(url, timeout=10)
    assert answer.status_code == 200, answer.status_code
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(answer.text) for sample in family.samples}


def test_a_json_replica_writes_only_json_and_one_access_line_per_mcp_request(sandbox: SandboxServer) -> None:
    # JSON from the environment and no level anywhere: serving HTTP logs access at INFO by default.
    server = HttpServer(env_for(sandbox, AGENT_AUTOMATION_LOG_FORMAT="json"), "--auth", "request")
    try:
        answers = [
            call(server.url, "list_models", {}, ALICE, x_request_id="req-0001"),
            call(server.url, "get_agent_run", {"agent_run_id": 987654}, ALICE),
            rpc(server.url, "tools/list", token=BOB),
            rpc(server.url, "tools/list"),  # no token
            rpc(server.url, "tools/list", token=STRANGER),
            rpc(server.url, "tools/list", token=ALICE, origin="http://evil.example"),
            legacy_initialize(server.url, ALICE),  # no Mcp-Method header: the method is read from the body
        ]
        assert httpx2.get(f"{server.origin}/healthz", timeout=10).status_code == 200  # not an /mcp request
    finally:
        stderr = server.stop()
    assert [answer.status_code for answer in answers] == [200, 200, 200, 401, 401, 403, 200]
    assert answers[0].headers["x-request-id"] == "req-0001"
    lines = json_lines(stderr)  # uvicorn's, the program's notices and the drain's lines included
    loggers = {line["logger"] for line in lines}
    assert {"uvicorn.error", "agent_automation_mcp.console", "agent_automation_mcp.remote.serve"} <= loggers
    access = access_lines(lines)
    assert len(access) == len(answers)
    assert all(set(line) >= ACCESS_FIELDS and line["level"] == "info" and line["path"] == "/mcp" for line in access)
    assert [answer.headers["x-request-id"] for answer in answers] == [line["request_id"] for line in access]
    assert len({line["request_id"] for line in access}) == len(access)
    summary = [(line["method"], line["tool"], line["outcome"], line["status"]) for line in access]
    # A request refused before its caller is known never has its body read: its line names no method.
    assert summary == [("tools/call", "list_models", "ok", 200), ("tools/call", "get_agent_run", "not_found", 200),
                       ("tools/list", None, "ok", 200), (None, None, "no_token", 401),
                       (None, None, "token_refused", 401), (None, None, "origin", 403),
                       ("initialize", None, "ok", 200)]
    assert all(isinstance(line["duration"], float) and 0 <= line["duration"] < 30 for line in access)
    tenants = [line["tenant"] for line in access]
    assert tenants[0] == tenants[1] == tenants[6] != tenants[2] and tenants[3] is None
    assert tenants[4] not in tenants[:3]
    # The tool's own line carries the same request id, so the two can be read together.
    (tool_line,) = [line for line in lines if line["event"] == "tool_call" and line["tool"] == "list_models"]
    assert tool_line["request_id"] == "req-0001" and tool_line["tenant"] == tenants[0]
    for secret in (ALICE, BOB, STRANGER, *(Credentials(token).token_key[:12] for token in (ALICE, BOB, STRANGER))):
        assert secret not in stderr


def test_a_signed_in_users_lines_name_one_tenant_before_and_after_a_refresh(sandbox: SandboxServer) -> None:
    """The access line and the tool's line name the tenant the sign-in acts for (its service token, as a bearer
    request with that token is named), whichever of the sign-in's access tokens the request carries."""
    port = free_port()
    server = HttpServer(env_for(sandbox, AGENT_AUTOMATION_LOG_FORMAT="json", AGENT_AUTOMATION_LOG_SECRET=SECRET,
                                AGENT_AUTOMATION_ALLOWED_ORGS="*"),
                        "--auth", "oauth", "--public-url", f"http://127.0.0.1:{port}", port=port)
    try:
        flow = RawFlow(server.origin)
        client_id = flow.register()
        first = flow.tokens(client_id, ALICE)
        refreshed = flow.refresh(client_id, first["refresh_token"]).json()
        answers = [call(server.url, "list_models", {}, token) for token in (first["access_token"],
                                                                         refreshed["access_token"], ALICE)]
    finally:
        stderr = server.stop()
    assert [answer.status_code for answer in answers] == [200, 200, 200]
    lines = json_lines(stderr)
    access = [line["tenant"] for line in access_lines(lines) if line.get("tool") == "list_models"]
    tools = [line["tenant"] for line in lines if line["event"] == "tool_call" and line["tool"] == "list_models"]
    named = hmac.new(SECRET.encode(), Credentials(ALICE).token_key.encode(), hashlib.sha256).hexdigest()[:16]
    assert access == tools == [named] * 3


def _tenant_of(stderr: str, token: str) -> str:
    (line,) = [line for line in access_lines(json_lines(stderr)) if line["status"] == 200]
    return line["tenant"]


def test_tenants_are_an_hmac_with_the_deployment_secret_alike_on_every_replica(sandbox: SandboxServer) -> None:
    """And a replica without the deployment's shared keys says so at start: the log key, the confirmation keys."""
    names, warnings = [], []
    for secret in (SECRET, SECRET, None):
        extra = {"AGENT_AUTOMATION_LOG_SECRET": secret, "AGENT_AUTOMATION_STATE_KEYS": secret * 2} if secret else {}
        server = HttpServer(env_for(sandbox, **extra), "--auth", "request", "--log-format", "json")
        try:
            assert rpc(server.url, "tools/list", token=ALICE).status_code == 200
        finally:
            stderr = server.stop()
        names.append(_tenant_of(stderr, ALICE))
        warnings.append(("AGENT_AUTOMATION_LOG_SECRET is not set" in stderr,
                         "AGENT_AUTOMATION_STATE_KEYS is not set" in stderr))
    assert names[0] == names[1] != names[2]  # two replicas sharing the secret agree; another process does not
    key = Credentials(ALICE).token_key
    assert names[0] == hmac.new(SECRET.encode(), key.encode(), hashlib.sha256).hexdigest()[:16]
    assert not any(name in (key, hashlib.sha256(ALICE.encode()).hexdigest()) or key.startswith(name) for name in names)
    assert warnings == [(False, False), (False, False), (True, True)]


def test_level_and_format_come_from_the_environment_and_flags_win(sandbox: SandboxServer) -> None:
    quiet = HttpServer(env_for(sandbox, AGENT_AUTOMATION_LOG_LEVEL="warning", AGENT_AUTOMATION_LOG_FORMAT="json"),
                       "--auth", "request")
    try:
        assert rpc(quiet.url, "tools/list", token=ALICE).status_code == 200
    finally:
        stderr = quiet.stop()
    lines = json_lines(stderr)
    assert not access_lines(lines) and {line["level"] for line in lines} <= {"warning", "error", "critical", "info"}
    assert not [line for line in lines if line["level"] == "info" and line["logger"] != "agent_automation_mcp.console"]
    text = HttpServer(env_for(sandbox, AGENT_AUTOMATION_LOG_LEVEL="ERROR", AGENT_AUTOMATION_LOG_FORMAT="json"),
                      "--auth", "request", "--log-level", "info", "--log-format", "text")
    try:
        assert rpc(text.url, "tools/list", token=ALICE).status_code == 200
    finally:
        stderr = text.stop()
    (access,) = [line for line in stderr.splitlines() if " INFO agent_automation_mcp.remote.access: " in line]
    assert "POST /mcp tools/list 200 ok" in access and not stderr.lstrip().startswith("{")
    refused = subprocess.run([sys.executable, "-m", "agent_automation_mcp", "--transport", "http"],
                             env=env_for(sandbox, AGENT_AUTOMATION_LOG_FORMAT="yaml"), capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL)
    assert refused.returncode == 2 and "AGENT_AUTOMATION_LOG_FORMAT" in refused.stderr


@pytest.mark.anyio
async def test_stdio_keeps_its_quiet_default(sandbox: SandboxServer) -> None:
    env = env_for(sandbox, AGENT_AUTOMATION_API_TOKEN=ALICE)
    with tempfile.TemporaryFile(mode="w+") as errlog:
        async with Client(stdio_client(stdio_server(env), errlog=errlog)) as client:
            assert not (await client.call_tool("list_models", {})).is_error
        errlog.seek(0)
        assert errlog.read() == ""  # nothing below WARNING, on stderr that a desktop client shows to its user


def test_metrics_count_refusals_by_reason_tool_durations_and_token_checks(sandbox: SandboxServer) -> None:
    server = HttpServer(env_for(sandbox), "--auth", "request", "--max-body-bytes", "2048")
    try:
        for _ in range(3):
            assert call(server.url, "list_models", {}, ALICE).status_code == 200
        assert call(server.url, "list_agent_runs", {"limit": 1}, BOB).status_code == 200
        statuses = [rpc(server.url, "tools/list").status_code,
                    rpc(server.url, "tools/list", token=STRANGER).status_code,
                    rpc(server.url, "tools/list", token=STRANGER).status_code,  # remembered: not checked again
                    rpc(server.url, "tools/list", token=ALICE, origin="http://evil.example").status_code,
                    rpc(server.url, "tools/list", token=ALICE, host="evil.example").status_code,
                    rpc(server.url, "tools/list", {"padding": "x" * 4096}, token=ALICE).status_code]
        samples = metric_samples(f"{server.origin}/metrics")  # no metrics port: on the public one, as before
    finally:
        server.stop()
    assert statuses == [401, 401, 401, 403, 421, 413]

    def refused(status: str, reason: str) -> float:
        return samples.get(("agent_automation_http_refused_total", (("reason", reason), ("status", status))), 0)

    assert [refused("401", "no_token"), refused("401", "token_refused"), refused("403", "origin"),
            refused("421", "host"), refused("413", "body_too_large")] == [1, 2, 1, 1, 1]
    assert samples[("agent_automation_http_responses_total", (("status", "200"),))] == 4
    count = ("agent_automation_tool_call_duration_seconds_count", (("tool", "list_models"),))
    assert samples[count] == 3 and samples[("agent_automation_tool_call_duration_seconds_count",
                                            (("tool", "list_agent_runs"),))] == 1
    buckets = sorted((float(dict(labels)["le"]), value) for (name, labels), value in samples.items()
                     if name == "agent_automation_tool_call_duration_seconds_bucket"
                     and ("tool", "list_models") in labels)
    assert buckets[-1] == (float("inf"), 3) and all(a[1] <= b[1] for a, b in itertools.pairwise(buckets))
    verdicts = {dict(labels)["verdict"]: value for (name, labels), value in samples.items()
                if name == "agent_automation_token_checks_total"}
    assert verdicts == {"accepted": 2, "refused": 1, "undecided": 0}  # Alice and Bob once each, the stranger once


@pytest.mark.anyio
async def test_metrics_on_their_own_port_only_and_through_the_drain(sandbox: SandboxServer) -> None:
    metrics_port = free_port()
    server = HttpServer(env_for(sandbox, AGENT_AUTOMATION_METRICS_PORT=str(metrics_port)), "--auth", "request",
                        "--shutdown-grace", "20")
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    try:
        assert httpx2.get(f"{server.origin}/metrics", timeout=10).status_code == 404
        assert httpx2.post(f"http://127.0.0.1:{metrics_port}/mcp", timeout=10).status_code == 404
        run = call(server.url, "create_agent_run", {"prompt": "hold the drain"}, ALICE)
        run_id = json.loads(run.text)["result"]["structuredContent"]["id"]
        async with anyio.create_task_group() as group:
            group.start_soon(anyio.to_thread.run_sync, lambda: call(
                server.url, "get_agent_run", {"agent_run_id": run_id, "wait_seconds": 10}, ALICE))
            # Each step waits for what it needs (a fixed sleep was too short on a busy machine): the call in flight,
            # then the drain begun; then one request, refused.
            await _until(lambda: metric_samples(metrics_url).get(("agent_automation_tool_calls_in_flight", ())) == 1)
            server.process.send_signal(signal.SIGTERM)
            await _until(lambda: httpx2.get(f"{server.origin}/readyz", timeout=5).json()["draining"] is True)
            draining = await anyio.to_thread.run_sync(lambda: rpc(server.url, "tools/list", token=ALICE))
            samples = await anyio.to_thread.run_sync(lambda: metric_samples(metrics_url))
        assert server.process.wait(timeout=30) == 0
    finally:
        server.stop()
    assert draining.status_code == 503
    assert samples[("agent_automation_http_refused_total", (("reason", "unavailable"), ("status", "503")))] == 1
    assert samples[("agent_automation_tool_calls_in_flight", ())] == 1  # the scraper sees the drain


async def _until(check: Callable[[], bool], seconds: float = 20.0) -> None:
    """Polls `check` (in a worker thread: it may block on HTTP) until it holds; fails after `seconds`."""
    with anyio.fail_after(seconds):
        while not await anyio.to_thread.run_sync(check):
            await anyio.sleep(0.05)


def test_a_metrics_port_equal_to_the_public_one_is_refused_at_start(sandbox: SandboxServer) -> None:
    same = subprocess.run([sys.executable, "-m", "agent_automation_mcp", "--transport", "http", "--port", "8123",
                           "--metrics-port", "8123"], env=env_for(sandbox), capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert same.returncode == 2 and "metrics port must differ" in same.stderr
