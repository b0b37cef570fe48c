"""Token checks across replicas: a verdict and an organisation lookup once per token whatever the number of
replicas (shared through Redis), and a bounded number of checks for tokens nobody has seen accepted."""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Iterator

import anyio
import httpx2
import pytest
from harness import RATE_LIMITS, SHARED_KEYS, HttpServer, clean_env, tenant_client
from redis import Redis
from test_remote import MODERN_CALL as LIST_CALL
from test_remote import MODERN_HEADERS as LIST_HEADERS

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.config import DEFAULT_TOKEN_CHECKS_PER_ADDRESS
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from pacing.redis_server import RedisServer, running_redis

TENANTS = tuple(f"tok-tenant-{i:02d}" for i in range(50))
LIMITS = RATE_LIMITS.replace("standard=2000/30s", "standard=20000/30s")  # room for every tenant: pacing is not tested


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(tokens=TENANTS, run_seconds=2.0, rate_limits=parse_rate_limits(LIMITS))) as server:
        yield server


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


def replicas(sandbox: SandboxServer, redis: RedisServer, count: int, *args: str) -> list[HttpServer]:
    env = clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=LIMITS,
                    AGENT_AUTOMATION_REDIS_URL=redis.url, **SHARED_KEYS)
    return [HttpServer(env, "--auth", "request", *args) for _ in range(count)]


def stop(servers: list[HttpServer], *secret: str) -> None:
    for server in servers:
        stderr = server.stop()
        assert not any(token in stderr for token in secret)


def upstream(sandbox: SandboxServer, since: int) -> Counter[str]:
    return Counter(str(record.operation) for record in sandbox.state.request_log[since:])


@pytest.mark.anyio
async def test_fifty_tenants_on_three_replicas_are_checked_and_looked_up_once_each(
        sandbox: SandboxServer, redis: RedisServer) -> None:
    servers = replicas(sandbox, redis, 3)
    before = len(sandbox.state.request_log)
    failed: list[str] = []
    limiter = anyio.CapacityLimiter(15)

    async def call(token: str, server: HttpServer) -> None:
        async with limiter, tenant_client(server.url, authorization=f"Bearer {token}") as client:
            result = await client.call_tool("list_repositories", {"limit": 1})  # needs the token's organisation
            if result.is_error:
                failed.append(str(result.structured_content))

    try:
        async with anyio.create_task_group() as group:
            for token in TENANTS:  # each tenant on every replica at once
                for server in servers:
                    group.start_soon(call, token, server)
    finally:
        stop(servers, *TENANTS)
    asked = upstream(sandbox, before)
    assert not failed, failed[0]
    assert asked["get_current_user"] == len(TENANTS) and asked["list_organizations"] == len(TENANTS)
    assert asked["list_repositories"] == 3 * len(TENANTS)


@pytest.mark.anyio
async def test_random_tokens_cost_at_most_the_budget_and_known_tenants_pass(
        sandbox: SandboxServer, redis: RedisServer) -> None:
    redis.flush()
    servers = replicas(sandbox, redis, 3)
    known = TENANTS[:5]
    statuses: Counter[int] = Counter()
    refusals: list[httpx2.Response] = []
    try:
        async with httpx2.AsyncClient(timeout=30) as http:
            for i, token in enumerate(known):  # seen accepted before the flood
                answer = await http.post(servers[i % 3].url, json=LIST_CALL,
                                         headers=LIST_HEADERS | {"authorization": f"Bearer {token}"})
                assert answer.status_code == 200
            before = len(sandbox.state.request_log)
            limiter = anyio.CapacityLimiter(50)

            async def stranger(i: int) -> None:
                async with limiter:
                    answer = await http.post(servers[i % 3].url, json=LIST_CALL, headers=LIST_HEADERS | {
                        "authorization": f"Bearer tok-{secrets.token_hex(12)}"})
                statuses[answer.status_code] += 1
                if answer.status_code == 429 and len(refusals) < 3:
                    refusals.append(answer)

            async with anyio.create_task_group() as group:
                for i in range(1500):
                    group.start_soon(stranger, i)
            checks = upstream(sandbox, before)["get_current_user"]
            with Redis.from_url(redis.url) as client:
                keys = client.dbsize()
            known_after = []
            for i, token in enumerate(known):  # on another replica than before
                async with tenant_client(servers[(i + 1) % 3].url, authorization=f"Bearer {token}") as client:
                    known_after.append(await client.call_tool("list_models", {}))
    finally:
        stderr = [server.stop() for server in servers]
    assert not any(token in text for text in stderr for token in known)
    assert not any("Redis is unreachable" in text for text in stderr), "a replica counted alone"
    assert 0 < checks <= DEFAULT_TOKEN_CHECKS_PER_ADDRESS and statuses == {401: checks, 429: 1500 - checks}
    assert keys <= 4 * checks + 6 * len(known) + 2  # per check its verdict and pacing keys, not per token sent
    error = refusals[0].json()["error"]
    assert refusals[0].headers["retry-after"] == str(error["retry_after_seconds"]) and error["kind"] == "rate_limited"
    assert 1 <= error["retry_after_seconds"] <= 60 and set(error["data"]) == {"kind", "status", "message",
                                                                              "retry_after_seconds", "hint"}
    assert all(not result.is_error for result in known_after)


@pytest.mark.anyio
@pytest.mark.parametrize("trusted", [True, False])
async def test_the_budget_holds_per_address_and_in_total_and_forwarded_for_counts_only_from_a_trusted_proxy(
        sandbox: SandboxServer, redis: RedisServer, trusted: bool) -> None:
    redis.flush()
    proxy = ("--trusted-proxy", "127.0.0.0/8") if trusted else ()
    servers = replicas(sandbox, redis, 2, "--token-checks-per-address", "3", "--token-checks-total", "7", *proxy)
    before = len(sandbox.state.request_log)
    statuses: dict[str, Counter[int]] = {}
    try:
        async with httpx2.AsyncClient(timeout=30) as http:
            for address in ("198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.4"):
                statuses[address] = Counter()
                for i in range(5):
                    answer = await http.post(servers[i % 2].url, json=LIST_CALL, headers=LIST_HEADERS | {
                        "authorization": f"Bearer tok-{secrets.token_hex(12)}", "x-forwarded-for": address})
                    statuses[address][answer.status_code] += 1
    finally:
        stop(servers)
    checks = upstream(sandbox, before)["get_current_user"]
    if trusted:  # each address its 3, until the total's 7 are spent
        assert [statuses[a][401] for a in statuses] == [3, 3, 1, 0] and checks == 7
    else:  # the header is ignored: one address, the socket's
        assert [statuses[a][401] for a in statuses] == [3, 0, 0, 0] and checks == 3
    assert all(sum(counts.values()) == 5 and set(counts) <= {401, 429} for counts in statuses.values())
