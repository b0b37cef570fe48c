"""A refusal at the gate reaches the person: the SDK's client shows its message, hint and retry time, in both eras.

Before, a refusal's body was only the error shape, and the SDK's client showed "Server returned an error response"
for every one of them (the TypeScript SDK, the raw body). The 401's WWW-Authenticate stays, for OAuth discovery.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest
from harness import MODES, HttpServer, refusal_shown, sandbox_env, tenant_client

from agent_automation_mcp.sandbox import SandboxServer


@pytest.fixture(scope="module")
def remote(sandbox: SandboxServer) -> Iterator[HttpServer]:
    # One unknown token checked per address a minute: the second is refused 429 without asking the service.
    server = HttpServer(sandbox_env(sandbox, AGENT_AUTOMATION_TOKEN_CHECKS_PER_ADDRESS="1"), "--auth", "request")
    yield server
    server.stop()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_the_sdk_client_shows_what_a_refusal_says_and_what_to_do(remote: HttpServer, mode: str) -> None:
    no_token = await refusal_shown(tenant_client(remote.url, mode))
    assert no_token.error.message.startswith("This server needs your own API token with each request. Send "
                                             "Authorization: Bearer <your Codegen API token>")
    assert no_token.error.data["kind"] == "unauthorized" and no_token.error.data["status"] == 401
    origin = await refusal_shown(tenant_client(remote.url, mode, origin="https://evil.example"))
    assert origin.error.data["kind"] == "forbidden" and origin.error.data["hint"] in origin.error.message


@pytest.mark.anyio
async def test_a_refused_token_and_a_spent_budget_say_so_with_the_time_to_wait(remote: HttpServer) -> None:
    refused = await refusal_shown(tenant_client(remote.url, "legacy", authorization="Bearer tok-first-stranger"))
    assert "refused this API token" in refused.error.message and "https://codegen.com/token" in refused.error.message
    spent = await refusal_shown(tenant_client(remote.url, authorization="Bearer tok-second-stranger"))
    assert spent.error.data["kind"] == "rate_limited" and spent.error.data["retry_after_seconds"] >= 1
    assert f"(Retry after {spent.error.data['retry_after_seconds']} s.)" in spent.error.message


def test_the_body_is_a_json_rpc_error_that_keeps_the_error_shape_and_the_challenge(remote: HttpServer) -> None:
    answer = httpx2.post(remote.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=10,
                         headers={"accept": "application/json, text/event-stream"})
    assert answer.status_code == 401 and answer.headers["www-authenticate"].startswith("Bearer ")
    body = answer.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None and body["error"]["code"] == -32001
    assert {"kind", "status", "message", "hint"} <= set(body["error"]) and body["error"]["data"]["status"] == 401
