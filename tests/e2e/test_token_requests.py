"""Each token's budget of task and completion requests: nothing else bounds these cheap requests, which read shared
state or the service for the token, so one token could send them as fast as it likes. Shared by the replicas."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import httpx2
import pytest
from harness import RATE_LIMITS, SHARED_KEYS, HttpServer, clean_env, http_servers

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from pacing.redis_server import running_redis

POLLER: Final = "tok-fast-poller"
COLLEAGUE: Final = "tok-patient-colleague"
BUDGET: Final = 5
COMPLETE: Final = {"jsonrpc": "2.0", "id": 1, "method": "completion/complete", "params": {
    "ref": {"type": "ref/prompt", "name": "runs_status"}, "argument": {"name": "who", "value": "m"}}}
LIST: Final = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
CALL: Final = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_models", "arguments": {}}}


@pytest.fixture(scope="module")
def replicas() -> Iterator[list[HttpServer]]:
    config = SandboxConfig(tokens=(POLLER, COLLEAGUE), rate_limits=parse_rate_limits(RATE_LIMITS))
    with SandboxServer(config) as sandbox, running_redis() as redis:
        env = clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS,
                        AGENT_AUTOMATION_REDIS_URL=redis.url, AGENT_AUTOMATION_REQUESTS_PER_TOKEN=str(BUDGET),
                        **SHARED_KEYS)
        servers = http_servers(2, env, "--auth", "request")
        yield servers
        for server in servers:
            server.stop()


def post(server: HttpServer, token: str, message: dict[str, object]) -> httpx2.Response:
    return httpx2.post(server.url, json=message, timeout=30, headers={
        "authorization": f"Bearer {token}", "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25"})


def test_past_its_budget_a_token_is_refused_429_with_the_wait_while_calls_and_others_go_on(
        replicas: list[HttpServer]) -> None:
    answers = [post(replicas[n % 2], POLLER, COMPLETE) for n in range(BUDGET + 1)]  # across both replicas
    assert [answer.status_code for answer in answers] == [200] * BUDGET + [429]
    refused = answers[-1]
    error = refused.json()["error"]
    assert error["kind"] == "rate_limited" and error["retry_after_seconds"] >= 1
    assert refused.headers["retry-after"] == str(error["retry_after_seconds"])
    assert f"this API token sent {BUDGET} task and completion requests" in error["data"]["message"]
    assert post(replicas[0], POLLER, CALL).status_code == 200  # tool calls have their own bound
    assert post(replicas[0], POLLER, LIST).status_code == 200  # answered from memory
    assert post(replicas[1], COLLEAGUE, COMPLETE).status_code == 200  # another token its own budget
    metrics = httpx2.get(f"{replicas[BUDGET % 2].origin}/metrics", timeout=10).text
    assert 'agent_automation_http_refused_total{reason="requests_per_token",status="429"} 1.0' in metrics
