"""Redis restarting, empty, and Redis away for a while: a sign-in made before goes on without its person (its tokens
and its client's id carry what it needs, sealed), and the replica's one Redis pool (redis_pool.py) leaves no dead
connection behind, so the first sign-in request after a restart succeeds, with no 503 and no fall back to local
pacing."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx2
import pytest
from harness import RATE_LIMITS, SHARED_KEYS, HttpServer, clean_env, free_port
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from oauth_flow import MemoryTokens, Person, RawFlow, oauth_client, once_redis_is_asked_again, pkce

from agent_automation_mcp.sandbox import SandboxServer
from agent_automation_mcp.sandbox.state import token_hash
from pacing.redis_server import RedisServer, running_redis


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    with running_redis() as server:  # no persistence: started again, it is empty
        yield server


def oauth_server(sandbox: SandboxServer, redis: RedisServer) -> HttpServer:
    port = free_port()
    env = clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_REDIS_URL=redis.url,
                    AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS, **SHARED_KEYS)
    return HttpServer(env, "--auth", "oauth", "--public-url", f"http://127.0.0.1:{port}", "--allowed-host",
                      f"127.0.0.1:{port}", port=port)


async def _calls_and_refreshes(client: Client, provider: OAuthClientProvider, storage: MemoryTokens,
                               sandbox: SandboxServer) -> None:
    """A call, then a refresh (the access token's hour made to pass on the client's side) and a call with the new
    token: each made with the token the person gave at the consent page."""
    assert not (await client.call_tool("list_users", {})).is_error
    before = storage.tokens
    provider.context.token_expiry_time = time.time() - 1
    assert not (await client.call_tool("list_users", {})).is_error
    assert storage.tokens is not None and before is not None and storage.tokens.access_token != before.access_token
    assert sandbox.state.request_log[-1].token_hash == token_hash(sandbox.token)


@pytest.mark.anyio
async def test_a_sign_in_goes_on_after_redis_restarts_empty_and_while_it_is_away(
        redis: RedisServer, sandbox: SandboxServer) -> None:
    server = oauth_server(sandbox, redis)
    try:
        await _signed_in_through_restarts_and_an_outage(server, redis, sandbox)
    finally:
        stderr = server.stop()
    assert "aamcp_at_" not in stderr and "aamcp_rt_" not in stderr and "aamcp_client_" not in stderr
    assert sandbox.token not in stderr


async def _signed_in_through_restarts_and_an_outage(server: HttpServer, redis: RedisServer,
                                                    sandbox: SandboxServer) -> None:
    person, storage = Person(sandbox.token), MemoryTokens()
    client, provider = oauth_client(server.url, person, storage)  # registers (DCR), then the person signs in
    async with client:
        await _calls_and_refreshes(client, provider, storage, sandbox)
        assert len(person.pages) == 1
        redis.stop()
        redis.start()  # same port, empty
        await _calls_and_refreshes(client, provider, storage, sandbox)
        redis.stop()  # away for a while
        try:
            await _calls_and_refreshes(client, provider, storage, sandbox)
            await _calls_and_refreshes(client, provider, storage, sandbox)
        finally:
            redis.start()  # back, empty again
        await _calls_and_refreshes(client, provider, storage, sandbox)
    assert len(person.pages) == 1  # the consent page was never shown again: no token pasted twice
    assert storage.client is not None and storage.tokens is not None
    flow = RawFlow(server.origin)
    tokens, client_id = storage.tokens, storage.client.client_id
    assert once_redis_is_asked_again(lambda: flow.revoke(tokens.access_token, client_id)).status_code == 200
    assert flow.mcp_status(storage.tokens.access_token).status_code == 401  # revocation holds once Redis is back
    refused = flow.refresh(storage.client.client_id, storage.tokens.refresh_token or "")
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"


def test_the_first_sign_in_request_after_a_redis_restart_succeeds(sandbox: SandboxServer, redis: RedisServer) -> None:
    server = oauth_server(sandbox, redis)
    flow = RawFlow(server.origin)
    client_id = flow.register()
    assert flow.consent_page(client_id, pkce()[1]).status_code == 200  # the sign-in store's connection is pooled
    assert httpx2.get(f"{server.origin}/readyz", timeout=10).json()["redis"] == "reachable"
    redis.stop()
    redis.start()  # same port, empty
    assert flow.consent_page(client_id, pkce()[1]).status_code == 200  # not 503; and the client is still known
    assert httpx2.get(f"{server.origin}/readyz", timeout=10).json()["redis"] == "reachable"
    stderr = server.stop()
    assert "unreachable" not in stderr and "Redis did not answer" not in stderr
