"""Rollouts behind the shipped balancer: 3 replicas sharing Redis behind `manifests/haproxy/haproxy.cfg`.

A confirmation's answer comes back in a new request that round robin sends to another replica; a replica that
drains with nothing in flight exits after its short minimum drain, and the balancer sends what it refuses to
another replica.
"""

from __future__ import annotations

import re
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import anyio
import httpx2
import pytest
from harness import RATE_LIMITS, SHARED_KEYS, HttpServer, clean_env, free_port
from mcp import Client, MCPError
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitRequestParams, ElicitResult
from prometheus_client.parser import text_string_to_metric_families

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from pacing.redis_server import RedisServer, started_on_redis

HAPROXY_CONFIG: Final = Path(__file__).resolve().parents[2] / "manifests" / "haproxy" / "haproxy.cfg"
OLD_KEY, NEW_KEY = "o" * 40, "n" * 40
# Mid-rotation: one replica already seals with the new key, the others still with the old one; all open both.
REPLICA_KEYS: Final = (f"{OLD_KEY},{NEW_KEY}", f"{NEW_KEY},{OLD_KEY}", f"{OLD_KEY},{NEW_KEY}")
CONFIRMATIONS: Final = 6


class Fleet:
    """Three replicas on fixed ports (so one can be restarted where the balancer expects it) behind HAProxy; `args`
    are more of the replicas' flags."""

    def __init__(self, sandbox: SandboxServer, redis: RedisServer, *args: str) -> None:
        self.sandbox = sandbox
        self.redis = redis
        self.args = args
        self.ports = [free_port() for _ in REPLICA_KEYS]
        self.replicas: list[HttpServer | None] = [None] * len(self.ports)
        self.balancer: HttpServer | None = None
        for index in range(len(self.ports)):
            self.start(index)
        port, self.metrics_port = free_port(), free_port()
        self.balancer = shipped_balancer(f"127.0.0.1:{port}", port, self.ports, self.metrics_port)
        self.wait_until_all_up()

    def start(self, index: int) -> HttpServer:
        env = clean_env(AGENT_AUTOMATION_BASE_URL=self.sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS,
                        AGENT_AUTOMATION_REDIS_URL=self.redis.url, AGENT_AUTOMATION_TOOLSETS="all",
                        AGENT_AUTOMATION_STATE_KEYS=REPLICA_KEYS[index],
                        AGENT_AUTOMATION_LOG_SECRET=SHARED_KEYS["AGENT_AUTOMATION_LOG_SECRET"])
        replica = HttpServer(env, "--auth", "request", *self.args, port=self.ports[index])
        self.replicas[index] = replica
        return replica

    def replica(self, index: int) -> HttpServer:
        replica = self.replicas[index]
        assert replica is not None
        return replica

    @property
    def url(self) -> str:
        assert self.balancer is not None
        return self.balancer.url

    def wait_until_all_up(self) -> None:
        """Until the balancer's health checks pass on every replica: each of 3 requests in a row is answered by
        its own replica (a down one would be skipped by round robin)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if all(httpx2.get(f"{r.origin}/readyz", timeout=5).status_code == 200 for r in map(self.replica, range(3))):
                time.sleep(1.5)  # rise 2 at fastinter 500 ms
                return
            time.sleep(0.2)
        raise RuntimeError("the replicas did not all become ready")

    def stop(self) -> None:
        for server in [self.balancer, *self.replicas]:
            if server is not None and server.process.poll() is None:
                server.stop()


def haproxy_binary() -> str:
    binary = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin")
    if binary is None:
        pytest.skip("haproxy is not installed (Debian: apt-get install haproxy); .ci/run installs it")
    return binary


def shipped_balancer(bind: str, port: int, replicas: Sequence[int], metrics_port: int) -> HttpServer:
    """HAProxy running the shipped config, listening at `bind` (`port` among them), its metrics at `metrics_port`.

    It needs two file descriptors a connection, and will not start where it cannot have them: under a hard limit
    lower than its maxconn needs (20,000 on the CI machine, which cannot raise it), `-n` lowers maxconn to fit."""
    shipped = int(re.search(r"^global\n\s+maxconn (\d+)", HAPROXY_CONFIG.read_text(), re.M).group(1))  # type: ignore[union-attr]
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    fits = shipped if hard == resource.RLIM_INFINITY else min(shipped, (hard - 1000) // 2)
    env = clean_env(MCP_BIND=bind, METRICS_BIND=f"127.0.0.1:{metrics_port}",
                    **{f"REPLICA_{i + 1}": f"127.0.0.1:{p}" for i, p in enumerate(replicas)})
    return HttpServer(env, port=port, command=[haproxy_binary(), "-db", "-n", str(fits), "-f", str(HAPROXY_CONFIG)])


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(run_seconds=2.0, rate_limits=parse_rate_limits(RATE_LIMITS))) as server:
        yield server


@pytest.fixture(scope="module")
def fleet(sandbox: SandboxServer) -> Iterator[Fleet]:
    haproxy_binary()
    with started_on_redis(lambda redis: Fleet(sandbox, redis), Fleet.stop) as fleet:
        yield fleet


def client(fleet: Fleet, sandbox: SandboxServer, **options: Any) -> Client:
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {sandbox.token}",
                                       "x-organization-id": str(sandbox.org_id)},
                              timeout=httpx2.Timeout(30, read=90))
    return Client(streamable_http_client(fleet.url, http_client=http), **options)


async def confirm(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirm": True})


def tool_calls(replica: HttpServer, tool: str) -> dict[str, float]:
    """Calls of `tool` this replica finished, by outcome, and its calls in flight now (`in_flight`)."""
    text = httpx2.get(f"{replica.origin}/metrics", timeout=10).text
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "agent_automation_tool_calls_total" and sample.labels["tool"] == tool:
                counts[sample.labels["outcome"]] = sample.value
            elif sample.name == "agent_automation_tool_calls_in_flight":
                counts["in_flight"] = sample.value
    return counts


@pytest.mark.anyio
async def test_a_confirmation_answered_on_another_replica_goes_through(fleet: Fleet, sandbox: SandboxServer) -> None:
    """2026-07-28: the answer is a new request, which round robin sends to the next replica."""
    asked: list[str] = []

    async def user(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return await confirm(context, params)

    sandbox.request_log.clear()
    before = sum(tool_calls(fleet.replica(i), "ban_checks").get("ok", 0) for i in range(3))
    outcomes: list[str] = []
    async with client(fleet, sandbox, elicitation_callback=user) as session:
        assert session.protocol_version == "2026-07-28"
        for _ in range(CONFIRMATIONS):
            try:
                result = await session.call_tool("ban_checks", {"agent_run_id": 401})
                outcomes.append("error" if result.is_error else "ok")
            except MCPError as exc:
                outcomes.append(exc.error.message)
    bans = [r for r in sandbox.request_log if r.operation == "ban_checks"]
    counts = [tool_calls(fleet.replica(i), "ban_checks") for i in range(3)]
    assert outcomes == ["ok"] * CONFIRMATIONS, outcomes
    assert len(asked) == CONFIRMATIONS and len(bans) == CONFIRMATIONS
    # Round robin: question and answer were served by different replicas, and only the answers count as calls.
    assert sum(c.get("ok", 0) for c in counts) - before == CONFIRMATIONS
    assert {outcome for count in counts for outcome, calls in count.items() if calls} <= {"ok", "in_flight"}
    assert [c["in_flight"] for c in counts] == [0, 0, 0]


@pytest.mark.anyio
async def test_a_continuation_opens_only_for_the_token_that_was_asked(fleet: Fleet, sandbox: SandboxServer) -> None:
    """The answer to someone else's question is refused, even on the replica that sealed it."""
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "ban_checks",
               "x-organization-id": str(sandbox.org_id)}
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "ban_checks", "arguments": {"agent_run_id": 401}, "_meta": meta}}
    replica = fleet.replica(0).url
    first = httpx2.post(replica, json=call, headers=headers | {"authorization": f"Bearer {sandbox.token}"},
                        timeout=30).json()["result"]
    assert first["resultType"] == "input_required"
    [key] = first["inputRequests"]
    answer = {**call, "id": 2, "params": {**call["params"], "requestState": first["requestState"],
                                          "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}}}
    stranger = httpx2.post(replica, json=answer, headers=headers | {"authorization": "Bearer tok-someone-else"},
                           timeout=30)
    assert stranger.status_code in (200, 401)
    if stranger.status_code == 200:  # the gate let the token through: the boundary must refuse the state
        assert stranger.json()["error"]["message"] == "Invalid or expired requestState"


@pytest.mark.anyio
async def test_a_drain_with_nothing_in_flight_ends_soon_and_the_balancer_hides_it(fleet: Fleet,
                                                                                     sandbox: SandboxServer) -> None:
    """SIGTERM one replica: it exits after its minimum drain, not its grace (60 s: no listening stream is ever held,
    GET /mcp gets 405), and calls made through the balancer meanwhile all succeed."""
    draining = fleet.replica(0)
    results: list[bool] = []
    draining.process.send_signal(signal.SIGTERM)
    async with client(fleet, sandbox) as session:
        with anyio.fail_after(20):
            while draining.process.poll() is None:
                results.append(not (await session.call_tool("list_models", {})).is_error)
                await anyio.sleep(0.05)
    code = draining.process.wait(timeout=10)
    stderr = draining.stop()
    fleet.start(0)
    fleet.wait_until_all_up()
    # drained because nothing was in flight, not because the grace ran out
    assert code == 0 and "SIGTERM: drained, exiting" in stderr and "still in flight" not in stderr, stderr[-2000:]
    assert all(results)


def test_the_shipped_config_refuses_nothing_haproxy_checks() -> None:
    done = subprocess.run(
        [haproxy_binary(), "-c", "-f", str(HAPROXY_CONFIG)], capture_output=True, text=True, timeout=30,
        env=clean_env(MCP_BIND="127.0.0.1:1", REPLICA_1="127.0.0.1:2", REPLICA_2="127.0.0.1:3",
                      REPLICA_3="127.0.0.1:4"))
    assert done.returncode == 0 and "Configuration file is valid" in done.stdout + done.stderr
