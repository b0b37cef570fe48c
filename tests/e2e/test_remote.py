"""Remote mode over real HTTP: per-request tokens and organisations, narrowing, Host and Origin, operations."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from harness import RATE_LIMITS, SHARED_KEYS, HttpServer, clean_env, error_of, http_servers, tenant_client
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import PromptReference
from prometheus_client.parser import text_string_to_metric_families
from redis import Redis

from agent_automation_mcp.api.credentials import Credentials
from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from pacing.redis_server import RedisServer, running_redis

ALICE, BOB, CAROL = "tok-alice-org1", "tok-bob-org2", "tok-carol-both"  # Carol belongs to both organisations
MODERN_CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
MODERN_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                  "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    config = SandboxConfig(tokens=(ALICE, BOB, CAROL), visible_orgs=2, token_orgs={ALICE: (1,), BOB: (2,)},
                           run_seconds=2.0, rate_limits=parse_rate_limits(RATE_LIMITS))
    with SandboxServer(config) as server:
        yield server


def remote_env(sandbox: SandboxServer, **values: str) -> dict[str, str]:
    return clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS, **values)


@pytest.fixture(scope="module")
def remote(sandbox: SandboxServer) -> Iterator[HttpServer]:
    server = HttpServer(remote_env(sandbox), "--auth", "request", "--log-level", "DEBUG")
    yield server
    stderr = server.stop()
    assert all(token not in stderr for token in (ALICE, BOB, CAROL))


def post(url: str, **headers: str) -> httpx2.Response:
    """A modern-era tools/list with `headers` (`x_organization_id` → `x-organization-id`)."""
    sent = MODERN_HEADERS | {name.replace("_", "-"): value for name, value in headers.items()}
    return httpx2.post(url, json=MODERN_CALL, headers=sent, timeout=30)


def test_a_request_without_a_usable_bearer_gets_401_that_says_what_to_send(remote: HttpServer) -> None:
    for headers in ({}, {"authorization": "Basic abc"}, {"authorization": "Bearer"}):
        answer = post(remote.url, **headers)
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == 'Bearer realm="agent-automation-mcp"'
        error = answer.json()["error"]
        assert error["kind"] == "unauthorized" and "Authorization: Bearer" in error["hint"]


def test_a_token_the_service_refuses_gets_401_before_any_tool_runs(remote: HttpServer, sandbox: SandboxServer) -> None:
    before = len(sandbox.state.request_log)
    for _ in range(3):
        answer = post(remote.url, authorization="Bearer tok-nobody-knows")
        assert answer.status_code == 401 and 'error="invalid_token"' in answer.headers["www-authenticate"]
        assert "refused" in answer.json()["error"]["message"]
    asked = [r.operation for r in sandbox.state.request_log[before:]]
    assert asked == ["get_current_user"]  # checked once, the verdict remembered


def test_a_body_over_the_cap_gets_413(remote: HttpServer) -> None:
    call = {**MODERN_CALL, "params": {**MODERN_CALL["params"], "padding": "x" * (1024 * 1024)}}
    answer = httpx2.post(remote.url, json=call, headers=MODERN_HEADERS | {"authorization": f"Bearer {ALICE}"},
                         timeout=30)
    assert answer.status_code == 413


def test_an_unusable_organisation_header_gets_400(remote: HttpServer) -> None:
    answer = post(remote.url, authorization=f"Bearer {ALICE}", x_organization_id="acme")
    assert answer.status_code == 400 and "X-Organization-Id" in answer.json()["error"]["message"]


def test_an_unusable_repository_header_gets_400(remote: HttpServer) -> None:
    answer = post(remote.url, authorization=f"Bearer {ALICE}", x_repo_id="web-app")
    assert answer.status_code == 400 and "X-Repo-Id" in answer.json()["error"]["message"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_connections_default_repository_is_its_x_repo_id_header(remote: HttpServer, sandbox: SandboxServer,
                                                                        mode: str) -> None:
    """Each request's own header, read with its caller: two tenants at once, each on its own default; a call's own
    repo_id wins; a repository of another organisation is refused before any write."""
    started: dict[str, tuple[int, int]] = {}

    async def tenant(token: str, repo: int) -> None:
        async with tenant_client(remote.url, mode, authorization=f"Bearer {token}", x_repo_id=str(repo)) as client:
            told = client.instructions or ""
            assert f"default repository is {repo} (" in told and "set by X-Repo-Id" in told, told
            run = (await client.call_tool("create_agent_run", {"prompt": f"On {repo}"})).structured_content
            own = (await client.call_tool("create_agent_run", {"prompt": "Own", "repo_id": repo - 1}))
            started[token] = (run["id"], own.structured_content["id"])

    async with anyio.create_task_group() as group:
        group.start_soon(tenant, ALICE, 202)
        group.start_soon(tenant, BOB, 1202)
    runs = sandbox.state.world.runs
    assert [runs[run_id].repo_id for run_id in started[ALICE]] == [202, 201]
    assert [runs[run_id].repo_id for run_id in started[BOB]] == [1202, 1201]
    before = len(sandbox.state.request_log)
    async with tenant_client(remote.url, mode, authorization=f"Bearer {ALICE}", x_repo_id="1202") as client:
        refused = error_of(await client.call_tool("create_agent_run", {"prompt": "Not ours"}))
    assert refused["kind"] == "configuration" and "1202 (set by X-Repo-Id)" in refused["message"]
    assert "X-Repo-Id" in refused["hint"]
    assert "create_agent_run" not in [r.operation for r in sandbox.state.request_log[before:]]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_two_tenants_in_two_organisations_at_once_never_see_each_others_runs(
        remote: HttpServer, sandbox: SandboxServer, mode: str) -> None:
    created: dict[str, int] = {}
    listed: dict[str, set[int]] = {}

    async def tenant(token: str) -> None:
        async with tenant_client(remote.url, mode, authorization=f"Bearer {token}") as client:
            run = await client.call_tool("create_agent_run", {"prompt": f"work for {token[:9]}"})
            assert not run.is_error, run
            created[token] = run.structured_content["id"]
            page = await client.call_tool("list_agent_runs", {"limit": 100})
            listed[token] = {r["id"] for r in page.structured_content["runs"]}

    async with anyio.create_task_group() as group:
        for token in (ALICE, BOB):
            group.start_soon(tenant, token)
    assert created[ALICE] in listed[ALICE] and created[BOB] in listed[BOB]
    assert not listed[ALICE] & listed[BOB]
    assert sandbox.state.world.runs[created[ALICE]].organization_id == 1
    assert sandbox.state.world.runs[created[BOB]].organization_id == 2
    async with tenant_client(remote.url, mode, authorization=f"Bearer {ALICE}") as client:
        other = error_of(await client.call_tool("get_agent_run", {"agent_run_id": created[BOB]}))
    assert other["kind"] == "not_found"


@pytest.mark.anyio
async def test_a_token_in_several_organisations_picks_one_with_the_header(remote: HttpServer) -> None:
    async with tenant_client(remote.url, authorization=f"Bearer {CAROL}") as client:
        error = error_of(await client.call_tool("list_agent_runs", {}))
    assert error["kind"] == "configuration" and "X-Organization-Id" in error["hint"]
    assert {org["id"] for org in error["details"]["organizations"]} == {1, 2}
    async with tenant_client(remote.url, authorization=f"Bearer {CAROL}", x_organization_id="2") as client:
        repos = await client.call_tool("list_repositories", {})
    assert not repos.is_error and {r["id"] // 1000 for r in repos.structured_content["repositories"]} == {1}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_headers_narrow_what_a_request_lists_and_calls_but_never_widen(sandbox: SandboxServer,
                                                                             mode: str) -> None:
    server = HttpServer(remote_env(sandbox), "--auth", "request", "--toolsets", "runs,logs,org")
    try:
        auth = {"authorization": f"Bearer {ALICE}"}
        async with tenant_client(server.url, mode, **auth, x_mcp_toolsets="runs,checks",
                                 x_mcp_readonly="true") as client:
            narrowed = {tool.name for tool in (await client.list_tools()).tools}
            with pytest.raises(MCPError) as hidden:
                await client.call_tool("create_agent_run", {"prompt": "x"})
            allowed = await client.call_tool("list_agent_runs", {"limit": 1})
        async with tenant_client(server.url, mode, **auth, x_mcp_toolsets="all") as client:
            widest = {tool.name for tool in (await client.list_tools()).tools}
    finally:
        server.stop()
    assert narrowed == {"get_agent_run", "list_agent_runs"}  # checks: not the operator's; writes: read-only
    assert hidden.value.error.code == -32602 and not allowed.is_error
    assert "ban_checks" not in widest and "get_agent_run_logs" in widest and "list_users" in widest


def test_host_and_origin_are_checked_on_every_loopback_address(sandbox: SandboxServer) -> None:
    env = remote_env(sandbox, AGENT_AUTOMATION_ALLOWED_HOSTS="mcp.example.com, other.example:8443")
    server = HttpServer(env, "--auth", "request", "--allowed-origin", "https://app.example.com", host="127.0.0.2")
    auth = {"authorization": f"Bearer {ALICE}"}
    try:
        refused_host = post(server.url, **auth, host="evil.example")
        refused_port = post(server.url, **auth, host="other.example:9999")
        refused_origin = post(server.url, **auth, origin="http://evil.example")
        accepted = [post(server.url, **auth, **extra).status_code for extra in (
            {}, {"host": "mcp.example.com"}, {"host": "MCP.example.com:443"}, {"host": "other.example:8443"},
            {"origin": "https://app.example.com"}, {"origin": f"http://127.0.0.2:{server.port}"})]
    finally:
        server.stop()
    assert refused_host.status_code == 421 and "--allowed-host" in refused_host.json()["error"]["hint"]
    assert refused_port.status_code == 421
    assert refused_origin.status_code == 403 and "--allowed-origin" in refused_origin.json()["error"]["hint"]
    assert accepted == [200] * 6


@pytest.mark.anyio
async def test_listening_on_ipv6_loopback(sandbox: SandboxServer) -> None:
    server = HttpServer(remote_env(sandbox), "--auth", "request", "--allowed-host", "mcp.example.com",
                        "--allowed-host", "[fd00::5]:8443", host="::1")
    try:
        async with tenant_client(server.url, authorization=f"Bearer {ALICE}") as client:
            runs = await client.call_tool("list_agent_runs", {"limit": 1})
        statuses = [post(server.url, authorization=f"Bearer {ALICE}", host=host).status_code
                    for host in ("evil.example", "mcp.example.com:80", "[fd00::5]:8443", "[fd00::5]:80")]
    finally:
        server.stop()
    assert server.url.startswith("http://[::1]:") and not runs.is_error and statuses == [421, 200, 200, 421]


def test_env_auth_beyond_loopback_refuses_to_start() -> None:
    command = [sys.executable, "-m", "agent_automation_mcp", "--transport", "http", "--host", "0.0.0.0",
               "--auth", "env"]
    done = subprocess.run(command, env=clean_env(AGENT_AUTOMATION_API_TOKEN="t"), capture_output=True, text=True,
                          timeout=30, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "--auth env on 0.0.0.0" in done.stderr and "--auth request" in done.stderr


def test_per_request_tokens_beyond_loopback_refuse_to_start_without_the_organisations_served() -> None:
    """Every Codegen user whose token reaches the port would be a tenant: the operator names the organisations, or
    says `*`; on loopback nothing is required."""
    command = [sys.executable, "-m", "agent_automation_mcp", "--transport", "http", "--host", "0.0.0.0",
               "--auth", "request", "--port", "1"]  # never reached: refused before it listens
    done = subprocess.run(command, env=clean_env(), capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "AGENT_AUTOMATION_ALLOWED_ORGS (--allowed-org) is not set" in done.stderr
    assert "set it to * to serve every organisation on purpose" in done.stderr
    wrong = subprocess.run([*command, "--allowed-org", "*", "--allowed-org", "41"], env=clean_env(),
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert wrong.returncode == 2 and "* alone" in wrong.stderr


def metric_samples(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx2.get(url, timeout=10).text
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


@pytest.mark.anyio
async def test_metrics_count_calls_by_tool_and_outcome_and_name_no_tenant(remote: HttpServer) -> None:
    async with tenant_client(remote.url, authorization=f"Bearer {ALICE}") as client:
        await client.call_tool("list_models", {})
        await client.call_tool("get_agent_run", {"agent_run_id": 987654})
    text = httpx2.get(f"{remote.origin}/metrics", timeout=10).text
    samples = metric_samples(f"{remote.origin}/metrics")
    assert samples[("agent_automation_tool_calls_total", (("outcome", "ok"), ("tool", "list_models")))] >= 1
    assert samples[("agent_automation_tool_calls_total", (("outcome", "not_found"), ("tool", "get_agent_run")))] >= 1
    assert samples[("agent_automation_upstream_requests_total", (("bucket", "standard"), ("status", "200")))] >= 1
    assert samples[("agent_automation_pacing_wait_seconds_count", ())] >= 2
    assert samples[("agent_automation_tool_calls_in_flight", ())] == 0
    assert samples[("agent_automation_redis_up", ())] == 0
    for secret in (ALICE, Credentials(ALICE).token_key[:12]):
        assert secret not in text
    labels = {label for family in text_string_to_metric_families(text) for sample in family.samples
              for label in sample.labels}  # tools such as list_organizations are named; no organisation is
    assert not labels & {"org", "org_id", "organization", "organisation", "tenant", "token"}


@pytest.mark.anyio
async def test_json_logs_one_object_per_line_with_the_tenant_hash_not_the_token(sandbox: SandboxServer) -> None:
    server = HttpServer(remote_env(sandbox), "--auth", "request", "--log-level", "INFO", "--log-format", "json")
    try:
        async with tenant_client(server.url, authorization=f"Bearer {ALICE}") as client:
            await client.call_tool("get_agent_run", {"agent_run_id": 987654})
    finally:
        stderr = server.stop()
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    calls = [line for line in lines if line.get("event") == "tool_call"]
    assert all({"time", "level", "event"} <= set(line) for line in lines)
    assert calls and calls[0]["tool"] == "get_agent_run" and calls[0]["outcome"] == "not_found"
    assert calls[0]["tenant"] and calls[0]["duration"] >= 0
    assert Credentials(ALICE).token_key[:12] not in stderr  # an HMAC names the tenant, never the token's plain hash
    assert ALICE not in stderr


def test_health_and_readiness(remote: HttpServer) -> None:
    assert httpx2.get(f"{remote.origin}/healthz", timeout=10).json() == {"status": "alive"}
    ready = httpx2.get(f"{remote.origin}/readyz", timeout=10)
    assert ready.status_code == 200 and ready.json() == {"ready": True, "draining": False, "redis": "not configured"}


@pytest.mark.anyio
async def test_sigterm_lets_the_call_in_flight_finish_and_refuses_new_work(sandbox: SandboxServer) -> None:
    server = HttpServer(remote_env(sandbox), "--auth", "request", "--shutdown-grace", "20")
    results: list[Any] = []
    async with tenant_client(server.url, authorization=f"Bearer {ALICE}") as client:
        run = await client.call_tool("create_agent_run", {"prompt": "finish me"})

        async def waiting_call() -> None:
            results.append(await client.call_tool("get_agent_run", {"agent_run_id": run.structured_content["id"],
                                                                    "wait_seconds": 10}))

        mark = len(sandbox.request_log)
        async with anyio.create_task_group() as group:
            group.start_soon(waiting_call)
            with anyio.fail_after(20):  # the call is in flight: its first status read reached the service
                while not any(r.operation in ("get_agent_run", "list_agent_runs") for r in sandbox.request_log[mark:]):
                    await anyio.sleep(0.05)
            server.process.send_signal(signal.SIGTERM)
            with anyio.move_on_after(20):  # the server has taken the signal (a busy machine may take a while)
                while (ready := await anyio.to_thread.run_sync(
                        lambda: httpx2.get(f"{server.origin}/readyz", timeout=5))).status_code == 200:
                    await anyio.sleep(0.05)
            refused = await anyio.to_thread.run_sync(lambda: post(server.url, authorization=f"Bearer {ALICE}"))
    code = server.process.wait(timeout=30)
    server.stop()
    assert ready.status_code == 503 and ready.json()["draining"] is True
    assert refused.status_code == 503 and refused.json()["error"]["kind"] == "unavailable"
    assert "reached no tool" in refused.json()["error"]["message"]  # what makes it safe for a balancer to retry
    assert refused.headers["retry-after"] == "1" and refused.headers["connection"] == "close"
    assert not results[0].is_error and results[0].structured_content["is_terminal"]
    assert code == 0


class Alternating(httpx2.AsyncBaseTransport):
    """A round-robin load balancer in miniature: each request goes to the next replica's port."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.sent: list[int] = []
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = self.ports[len(self.sent) % len(self.ports)]
        self.sent.append(port)
        request.url = request.url.copy_with(port=port)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.mark.anyio
async def test_a_legacy_session_started_on_one_replica_is_served_by_another(sandbox: SandboxServer) -> None:
    replicas = http_servers(2, remote_env(sandbox), "--auth", "request")
    balancer = Alternating([replica.port for replica in replicas])
    http = httpx2.AsyncClient(transport=balancer, headers={"authorization": f"Bearer {ALICE}"},
                              timeout=httpx2.Timeout(30, read=60))
    try:
        async with Client(streamable_http_client(replicas[0].url, http_client=http), mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            calls = [await client.call_tool("list_agent_runs", {"limit": 1}) for _ in range(4)]
        counts = [sum(v for (name, labels), v in metric_samples(f"{r.origin}/metrics").items()
                      if name == "agent_automation_tool_calls_total") for r in replicas]
    finally:
        for replica in replicas:
            replica.stop()
    assert all(not call.is_error for call in calls)
    assert set(balancer.sent) == {r.port for r in replicas} and all(count >= 1 for count in counts)


def test_idle_http_sessions_are_not_kept(remote: HttpServer) -> None:
    """Stateless serving: a legacy initialize gets no session id, so nothing waits in memory for a client."""
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    answer = httpx2.post(remote.url, json=initialize, timeout=10, headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream",
        "authorization": f"Bearer {ALICE}"})
    assert answer.status_code == 200 and "mcp-session-id" not in answer.headers


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


@pytest.mark.anyio
async def test_replicas_share_redis_and_losing_it_leaves_them_ready(sandbox: SandboxServer,
                                                                    redis: RedisServer) -> None:
    env = remote_env(sandbox, AGENT_AUTOMATION_REDIS_URL=redis.url, **SHARED_KEYS)
    replicas = http_servers(2, env, "--auth", "request")
    balancer = Alternating([replica.port for replica in replicas])
    http = httpx2.AsyncClient(transport=balancer, headers={"authorization": f"Bearer {BOB}"},
                              timeout=httpx2.Timeout(30, read=60))
    try:
        async with Client(streamable_http_client(replicas[0].url, http_client=http), mode="legacy") as client:
            calls = [await client.call_tool("list_repositories", {}) for _ in range(3)]
        shared = [httpx2.get(f"{r.origin}/readyz", timeout=10).json()["redis"] for r in replicas]
        up = metric_samples(f"{replicas[0].origin}/metrics")[("agent_automation_redis_up", ())]
        keys = redis_keys(redis)
        redis.stop()
        lost = httpx2.get(f"{replicas[1].origin}/readyz", timeout=10)
        down = metric_samples(f"{replicas[1].origin}/metrics")[("agent_automation_redis_up", ())]
        async with tenant_client(replicas[1].url, authorization=f"Bearer {BOB}") as client:
            degraded = await client.call_tool("list_repositories", {})
    finally:
        for replica in replicas:
            replica.stop()
    assert all(not call.is_error for call in calls) and set(balancer.sent) == {r.port for r in replicas}
    assert shared == ["reachable", "reachable"] and up == 1
    assert any(Credentials(BOB).token_key in key for key in keys) and not any(BOB in key for key in keys)
    assert lost.status_code == 200 and lost.json() == {"ready": True, "draining": False, "redis": "unreachable"}
    assert down == 0 and not degraded.is_error


def redis_keys(redis: RedisServer) -> list[str]:
    with Redis.from_url(redis.url, decode_responses=True) as client:
        return list(client.keys("*"))


@pytest.mark.anyio
async def test_calls_past_a_tenants_cap_wait_their_turn_and_finish_without_holding_up_another(
        sandbox: SandboxServer) -> None:
    server = HttpServer(remote_env(sandbox), "--auth", "request", "--max-tenant-calls", "1")
    results: dict[str, Any] = {}
    finished: list[str] = []
    try:
        async with tenant_client(server.url, authorization=f"Bearer {ALICE}") as alice, \
                tenant_client(server.url, authorization=f"Bearer {BOB}") as bob:
            run = await alice.call_tool("create_agent_run", {"prompt": "take a while"})

            async def call(name: str, client: Client, tool: str, arguments: dict[str, Any]) -> None:
                results[name] = await client.call_tool(tool, arguments)
                finished.append(name)

            async with anyio.create_task_group() as group:
                group.start_soon(call, "waiting", alice, "get_agent_run",
                                 {"agent_run_id": run.structured_content["id"], "wait_seconds": 3})
                await anyio.sleep(0.5)
                for i in range(3):  # over the cap: they queue behind the waiting call, in order
                    group.start_soon(call, f"queued-{i}", alice, "list_models", {})
                    await anyio.sleep(0.05)
                await call("other", bob, "list_models", {})
    finally:
        server.stop()
    assert all(not result.is_error for result in results.values()) and len(results) == 5
    # Alice's calls one at a time, in the order they came; Bob's whenever it is done (the cap is Alice's).
    assert [name for name in finished if name != "other"] == ["waiting", "queued-0", "queued-1", "queued-2"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_repository_completions_are_each_callers_own(remote: HttpServer, mode: str) -> None:
    """A prompt's repository argument completes from the caller's own organisation, never another tenant's."""
    completed: dict[str, set[str]] = {}
    listed: dict[str, set[str]] = {}
    for token in (ALICE, BOB):
        async with tenant_client(remote.url, mode, authorization=f"Bearer {token}") as client:
            result = await client.complete(PromptReference(name="delegate_task"), {"name": "repository", "value": ""})
            completed[token] = set(result.completion.values)
            repos = (await client.call_tool("list_repositories", {"limit": 100})).structured_content["repositories"]
            listed[token] = {repo["full_name"] for repo in repos}
    assert completed[ALICE] == listed[ALICE] and completed[BOB] == listed[BOB]
    assert completed[ALICE] and not completed[ALICE] & completed[BOB]
