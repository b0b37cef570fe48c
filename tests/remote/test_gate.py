"""The gate's checks as a table: every refusal a row declares is one the metrics catalogue, and a request each row
refuses is counted under a reason that row declares. In process, over loopback, against the sandbox."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx2
import pytest
from served_app import body_never_whole, served
from starlette.types import Receive, Scope, Send

from agent_automation_mcp.api import ApiTransport
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.caching import SharedStore
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.pacing import create_pacer
from agent_automation_mcp.remote import access, bodies
from agent_automation_mcp.remote.access import AccessLog
from agent_automation_mcp.remote.budgets import AddressBudgets
from agent_automation_mcp.remote.gate import CHECKS, Lifecycle, McpGate, token_requests_budget
from agent_automation_mcp.remote.hosts import HostPolicy
from agent_automation_mcp.remote.metrics import REFUSALS, Metrics
from agent_automation_mcp.remote.organizations import AllowedOrganizations
from agent_automation_mcp.remote.verdicts import TokenVerdicts, strangers_budget
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.server import build_server
from agent_automation_mcp.tools.callers import RequestCaller, ServerState

ALICE, BOB, CAROL = "tok-alice-org1", "tok-bob-org2", "tok-carol-undecided"
DECLARED = {(str(status), reason) for check in CHECKS for status, reason in check.refusals}
# Refused by the SDK behind the gate (406, 413).
ELSEWHERE = {(str(status), access.REASONS[status]) for status in (406, 413)}
HELD = 4096  # body bytes the gate holds at once
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def test_every_refusal_a_check_declares_is_catalogued_and_every_catalogued_one_has_a_source() -> None:
    for check in CHECKS:
        missing = {(str(status), reason) for status, reason in check.refusals} - set(REFUSALS)
        assert not missing, (f"gate.CHECKS: {check.refuses.__name__} answers {sorted(missing)}, which "
                             "remote/metrics.py's REFUSALS lacks (add them there, and to docs/operations.md's "
                             "agent_automation_http_refused_total row)")
    unsourced = set(REFUSALS) - DECLARED - ELSEWHERE
    assert not unsourced, f"metrics.REFUSALS names {sorted(unsourced)}, which no row of gate.CHECKS answers"


async def answered(scope: Scope, receive: Receive, send: Send) -> None:
    """What the SDK would do with a request the gate let through, as far as this test cares: answer it."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


@pytest.fixture
async def gated() -> AsyncIterator[tuple[str, Metrics, Lifecycle, SandboxServer]]:
    config = SandboxConfig(tokens=(ALICE, BOB, CAROL), visible_orgs=2, token_orgs={ALICE: (1,), BOB: (2,)})
    with SandboxServer(config) as sandbox:
        api = ApiSettings(token=ALICE, base_url=sandbox.url, timeout=5.0)
        server = build_server(api, ServerSettings(), callers=RequestCaller())
        lifecycle, metrics = Lifecycle(ready=True), Metrics()
        budgets = AddressBudgets(SharedStore(), [strangers_budget(per_address=4), token_requests_budget(1)])
        verdicts = TokenVerdicts(budgets=budgets, organizations=AllowedOrganizations.of((1,)))
        gate = McpGate(answered, server, HostPolicy.build("127.0.0.1", (), ()), lifecycle, per_request_auth=True,
                       verdicts=verdicts, budgets=budgets, body_bytes_held=HELD)
        async with ApiTransport(api, create_pacer(api)) as transport:
            server.state = ServerState(transport=transport, callers=RequestCaller(), settings=server.server_settings)
            async with served(AccessLog(gate, metrics)) as port:
                yield f"http://127.0.0.1:{port}/mcp", metrics, lifecycle, sandbox


def refused_counts(metrics: Metrics) -> dict[tuple[str, str], float]:
    return {(sample.labels["status"], sample.labels["reason"]): sample.value
            for metric in metrics.registry.collect() if metric.name == "agent_automation_http_refused"
            for sample in metric.samples if sample.name.endswith("_total")}


@pytest.mark.anyio
async def test_each_check_refuses_under_a_reason_it_declares(
        gated: tuple[str, Metrics, Lifecycle, SandboxServer], monkeypatch: pytest.MonkeyPatch) -> None:
    url, metrics, lifecycle, sandbox = gated
    monkeypatch.setattr(bodies, "BODY_SECONDS", 0.5)
    counted: set[tuple[str, str]] = set()

    async with httpx2.AsyncClient(timeout=20) as http:
        async def refusal(send: Callable[[], Any], token: str | None = None,
                          **headers: str) -> tuple[str, str] | None:
            before = refused_counts(metrics)
            answer = await send(headers | ({"authorization": f"Bearer {token}"} if token else {}))
            moved = [key for key, value in refused_counts(metrics).items() if value > before.get(key, 0)]
            assert len(moved) == (answer.status_code != 200), (answer.status_code, moved)
            counted.update(moved)
            return moved[0] if moved else None

        def post(message: dict[str, Any] = LIST) -> Callable[[dict[str, str]], Any]:
            return lambda headers: http.post(url, json=message, headers=headers)

        assert await refusal(post(), ALICE) is None  # accepted: known from now on, it spends no stranger's check
        assert await refusal(post(), ALICE, host="evil.example") == ("421", "host")
        assert await refusal(post(), ALICE, origin="https://evil.example") == ("403", "origin")
        assert await refusal(lambda headers: http.get(url, headers=headers), ALICE) == ("405", "method_not_allowed")
        assert await refusal(post({"jsonrpc": "2.0", "id": 1, "method": "m" * 65}), ALICE) == ("400", "overlong")
        port = httpx2.URL(url).port
        assert port is not None
        assert await refusal(lambda headers: body_never_whole(port, "/mcp", **headers), ALICE) == (
            "408", "body_too_slow")
        assert await refusal(post({**LIST, "params": {"_meta": {"x": "x" * HELD}}}), ALICE) == ("503", "bodies_held")
        assert await refusal(post(), ALICE, **{"x-mcp-toolsets": "nonesuch"}) == ("400", "bad_request")
        assert await refusal(post()) == ("401", "no_token")
        assert await refusal(post(), "tok-nobody") == ("401", "token_refused")
        assert await refusal(post(), BOB) == ("403", "org_not_allowed")
        httpx2.put(f"{sandbox.url}/_sandbox/faults", json={"error_rate": 1.0, "operations": ["get_current_user"]})
        assert await refusal(post(), CAROL) == ("502", "undecided")
        assert await refusal(post(), "tok-another-nobody") == ("429", "rate_limited")  # a fifth token checked from here
        tasks = post({"jsonrpc": "2.0", "id": 2, "method": "tasks/list"})
        assert await refusal(tasks, ALICE) is None
        assert await refusal(tasks, ALICE) == ("429", "requests_per_token")
        lifecycle.draining = True
        assert await refusal(post(), ALICE) == ("503", "unavailable")

    # What a read-only sign-in answers is refused in tests/e2e/test_read_only_grant.py (a sign-in takes a browser's
    # steps); the sign-in's own 503 (its store not answering) in tests/e2e/test_signin_safety.py.
    undeclared = counted - DECLARED
    assert not undeclared, f"counted {sorted(undeclared)}, which no row of remote/gate.py's CHECKS declares"
    assert DECLARED - counted == {("403", "insufficient_scope")}, "a row's refusal that this test does not provoke"


@pytest.mark.anyio
async def test_a_body_still_coming_holds_no_drain_and_is_refused_if_the_drain_began(
        gated: tuple[str, Metrics, Lifecycle, SandboxServer]) -> None:
    """While its body comes a request is not in flight (a drain never waits for a slow client); once it came, a
    replica that began draining meanwhile answers 503, nothing done, for a balancer to send it elsewhere."""
    url, _, lifecycle, sandbox = gated
    host, port = url.removeprefix("http://").partition("/")[0].split(":")
    body = json.dumps(LIST).encode()
    async with await anyio.connect_tcp(host, int(port)) as connection:
        await connection.send(f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {ALICE}\r\n"
                              f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                              + body[:5])
        with anyio.fail_after(10):
            async with httpx2.AsyncClient() as http:
                while lifecycle.in_flight or not (await http.get(f"{sandbox.url}/_sandbox/requests", params={
                        "operation": "list_organizations"})).json():  # the token checked, its body awaited
                    await anyio.sleep(0.01)
        lifecycle.draining = True
        await connection.send(body[5:])
        with anyio.fail_after(10):
            answer = await connection.receive()
    assert answer.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in answer.lower()
    assert lifecycle.in_flight == 0
