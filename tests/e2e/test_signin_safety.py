"""Sign-in on the open Internet, in the recommended topology: 3 replicas (`--auth oauth`, the company's organisation
only) sharing Redis behind the shipped `manifests/haproxy/haproxy.cfg`, which they trust as their proxy.

Clients come from two addresses, both loopback: 127.0.0.1 (the stranger, and most tests) and [::1] (a colleague
at another address). The rows of issue 26 this answers: sign-in budgets are per client address and cannot be
spoofed, a real refresh or a new colleague is not stopped by junk, registrations are bounded, sign-in writes an
access line and a metric, and only the allowed organisation's tokens are served.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import anyio
import httpx2
import pytest
from cryptography.fernet import Fernet
from harness import RATE_LIMITS, SHARED_KEYS, HttpServer, clean_env, free_port, http_servers
from oauth_flow import REDIRECT_URI, RawFlow, pkce
from prometheus_client.parser import text_string_to_metric_families
from redis import Redis
from test_listen_streams import listen
from test_rollouts import shipped_balancer
from test_tasks import http_client, started

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.config import DEFAULT_TOKEN_CHECKS_PER_ADDRESS
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.sandbox.state import token_hash
from agent_automation_mcp.tasks.notify import MAX_TENANT_STREAMS
from pacing.redis_server import RedisServer, started_on_redis
from task_requester import TaskPoller

ALICE, BOB, CAROL = "tok-safety-alice", "tok-safety-bob", "tok-safety-carol"  # org 1; org 2 only; both
NEWCOMER = "tok-safety-newcomer"  # org 1, never seen before the junk
ALICE_CI = "tok-safety-alice-ci"  # Alice's second token
LATECOMERS = ("tok-safety-latecomer-1", "tok-safety-latecomer-2")  # org 1, never seen before the floods
ALLOWED_ORG: Final = 1
JUNK_TOKENS: Final = DEFAULT_TOKEN_CHECKS_PER_ADDRESS  # the default budget of checks per address and minute
REGISTRATIONS: Final = 10  # per address and minute: --oauth signins (default 10) × 1
TOKEN_REQUESTS: Final = 30  # per address and minute: 3 × 10


class Fleet:
    """Three sign-in replicas behind the shipped HAProxy, listening on 127.0.0.1 and [::1] at one port."""

    def __init__(self, sandbox: SandboxServer, redis: RedisServer) -> None:
        self.redis = redis
        self.port = free_port()
        self.origin = f"http://127.0.0.1:{self.port}"
        self.other_origin = f"http://[::1]:{self.port}"
        env = clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS,
                        AGENT_AUTOMATION_REDIS_URL=redis.url,
                        AGENT_AUTOMATION_OAUTH_KEYS=Fernet.generate_key().decode(),
                        AGENT_AUTOMATION_TRUSTED_PROXIES="127.0.0.1", AGENT_AUTOMATION_ALLOWED_ORGS=str(ALLOWED_ORG),
                        AGENT_AUTOMATION_LOG_FORMAT="json", **SHARED_KEYS)
        args = ("--auth", "oauth", "--public-url", self.origin, "--allowed-host", f"127.0.0.1:{self.port}",
                "--allowed-host", f"[::1]:{self.port}")
        self.replicas = http_servers(3, env, *args)
        self.stderr: list[str] = []
        self.balancer = shipped_balancer(f"127.0.0.1:{self.port},[::1]:{self.port}", self.port,
                                         [replica.port for replica in self.replicas], free_port())
        deadline = time.monotonic() + 30
        while not all(httpx2.get(f"{r.origin}/readyz", timeout=5).status_code == 200 for r in self.replicas):
            assert time.monotonic() < deadline, "the replicas did not become ready"
            time.sleep(0.2)
        time.sleep(1.5)  # the balancer's checks: rise 2 at fastinter 500 ms

    def metric(self, name: str, **labels: str) -> float:
        """A counter's sum over the three replicas, for the samples whose labels include `labels`."""
        total = 0.0
        for replica in self.replicas:
            text = httpx2.get(f"{replica.origin}/metrics", timeout=10).text
            for family in text_string_to_metric_families(text):
                total += sum(sample.value for sample in family.samples if sample.name == name
                             and labels.items() <= sample.labels.items())
        return total

    def stop(self) -> list[str]:
        """What each replica wrote on stderr (stopped once: a second call answers the same)."""
        if not self.stderr:
            self.balancer.stop()
            self.stderr = [replica.stop() for replica in self.replicas]
        return self.stderr


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    config = SandboxConfig(tokens=(ALICE, BOB, CAROL, NEWCOMER, ALICE_CI, *LATECOMERS), visible_orgs=2,
                           token_orgs={ALICE: (1,), BOB: (2,), NEWCOMER: (1,)} | dict.fromkeys(LATECOMERS, (1,)),
                           token_owners={ALICE_CI: ALICE},
                           rate_limits=parse_rate_limits(RATE_LIMITS))
    with SandboxServer(config) as server:
        yield server


@pytest.fixture(scope="module")
def fleet(sandbox: SandboxServer) -> Iterator[Fleet]:
    def stop(fleet: Fleet) -> None:
        for stderr in fleet.stop():
            assert ALICE not in stderr and CAROL not in stderr and NEWCOMER not in stderr

    with started_on_redis(lambda redis: Fleet(sandbox, redis), stop) as fleet:
        yield fleet


def _parallel(count: int, send: Any) -> list[int]:
    """`send(i)` for i in range(count), 16 at a time; the statuses."""
    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(send, range(count)))


def _spoofed(index: int) -> dict[str, str]:
    return {"x-forwarded-for": f"203.0.{index // 250}.{index % 250 + 1}"}


def test_junk_token_requests_do_not_stop_a_real_refresh_or_code_exchange(fleet: Fleet) -> None:
    """First, while 127.0.0.1 has its registrations left: sign in from there, then flood /token from there."""
    flow = RawFlow(fleet.origin)
    client_id = flow.register()
    tokens = flow.tokens(client_id, ALICE)
    code, verifier = flow.code(client_id, ALICE)
    junk = _parallel(TOKEN_REQUESTS + 5, lambda i: flow.http.post(f"{fleet.origin}/token", data={
        "grant_type": "refresh_token", "refresh_token": f"aamcp_rt_{secrets.token_urlsafe(32)}",
        "client_id": client_id}).status_code)
    assert junk.count(429) >= 5  # the address's budget is spent
    refreshed = flow.refresh(client_id, tokens["refresh_token"])
    assert refreshed.status_code == 200, refreshed.text
    assert flow.exchange(client_id, code, verifier).status_code == 200
    assert fleet.metric("agent_automation_oauth_requests_total", endpoint="token", status="429",
                        reason="rate_limited") >= 5


def test_registrations_are_bounded_per_address_even_with_a_spoofed_forwarded_for_and_another_address_still_registers(
        fleet: Fleet) -> None:
    flow = RawFlow(fleet.origin)
    body = {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"}
    statuses = _parallel(3 * REGISTRATIONS, lambda i: flow.http.post(f"{fleet.origin}/register", json=body,
                                                                       headers=_spoofed(i)).status_code)
    assert statuses.count(201) <= REGISTRATIONS and statuses.count(429) >= 2 * REGISTRATIONS
    assert RawFlow(fleet.other_origin).http.post(f"{fleet.other_origin}/register", json=body).status_code == 201
    large = {**body, "redirect_uris": [f"https://claude.ai/{i}/{'x' * 1900}" for i in range(10)]}
    refused = RawFlow(fleet.other_origin).http.post(f"{fleet.other_origin}/register", json=large)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_client_metadata"


def test_after_a_budget_of_junk_tokens_with_spoofed_addresses_a_colleagues_first_call_succeeds(
        fleet: Fleet, sandbox: SandboxServer) -> None:
    flow = RawFlow(fleet.origin)
    statuses = _parallel(JUNK_TOKENS + 10, lambda i: flow.http.post(
        f"{fleet.origin}/mcp", headers={"authorization": f"Bearer tok-junk-{secrets.token_hex(12)}",
                                        **_spoofed(i)}).status_code)
    assert statuses.count(429) >= 10  # every junk token counted against the one real address
    assert RawFlow(fleet.origin).mcp_status(f"tok-junk-{secrets.token_hex(12)}").status_code == 429
    colleague = RawFlow(fleet.other_origin).mcp_status(NEWCOMER)  # never seen before, from another address
    assert colleague.status_code == 200, colleague.text
    assert sandbox.state.request_log[-1].token_hash == token_hash(NEWCOMER)


def test_a_token_of_another_organisation_is_refused_once_per_verdict_and_never_becomes_a_tenant(
        fleet: Fleet, sandbox: SandboxServer) -> None:
    flow = RawFlow(fleet.other_origin)
    refused = [flow.mcp_status(BOB) for _ in range(3)]
    for answer in refused:
        assert answer.status_code == 403
        error = answer.json()["error"]
        assert error["kind"] == "forbidden" and "none of the organisations this server serves" in error["message"]
    asked = [record for record in sandbox.state.request_log if record.token_hash == token_hash(BOB)]
    assert [record.path for record in asked] == ["/v1/users/me", "/v1/organizations"]  # one check, no tool call
    assert fleet.metric("agent_automation_http_refused_total", status="403", reason="org_not_allowed") >= 3
    # Carol sees both organisations: served in the allowed one, refused in the other
    assert flow.mcp_status(CAROL).status_code == 200
    other = flow.http.post(f"{fleet.other_origin}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                           headers={"authorization": f"Bearer {CAROL}", "x-organization-id": "2",
                                    "accept": "application/json, text/event-stream"})
    refusal = other.json()["error"]
    assert other.status_code == 403 and "does not serve organisation 2" in refusal["message"]
    assert "X-Organization-Id: 1" in refusal["hint"] and "belongs to none" not in refusal["hint"]
    # On the consent page: refused with the message, and no code issued
    client_id = flow.register()
    _, challenge = pkce()
    page = flow.approve(flow.consent_page(client_id, challenge), BOB)
    assert page.status_code == 400 and "serves only its company" in page.text
    assert fleet.metric("agent_automation_oauth_requests_total", endpoint="consent",
                        reason="org_not_allowed") == 1


def _from(origin: str, address: str) -> RawFlow:
    """A client at `address`: a loopback address in a /24 of its own, which the balancer sees as the client's."""
    return RawFlow(origin, httpx2.Client(transport=httpx2.HTTPTransport(local_address=address), timeout=30))


def _forget_budgets(fleet: Fleet) -> None:
    """The minute's counts of the tests before, gone: each flood below starts from nothing (the verdicts, sign-ins
    and networks vouched for stay)."""
    with Redis.from_url(fleet.redis.url) as client:
        for purpose in ("strangers", "register", "authorize", "token", "revoke"):
            for key in client.scan_iter(f"aamcp:{{{purpose}}}:*"):
                client.delete(key)


def test_registrations_from_six_networks_leave_a_colleagues_sign_in_alone(fleet: Fleet) -> None:
    """120 registrations a minute from 6 networks (two addresses each, at their bound) spent the registrations' one
    total, so every new connection from Claude, ChatGPT or an IDE on a fresh network was refused with 429 "from your
    address": a registration costs Redis nothing now (sealed into its client id), and has no total."""
    _forget_budgets(fleet)
    body = {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"}
    statuses: list[int] = []
    for network in range(6):
        for host in (1, 2):
            flow = _from(fleet.origin, f"127.{30 + network}.0.{host}")
            statuses += _parallel(REGISTRATIONS + 1, lambda i, flow=flow: flow.http.post(  # type: ignore[misc]
                f"{fleet.origin}/register", json=body).status_code)
    assert statuses.count(201) == 12 * REGISTRATIONS and statuses.count(429) == 12
    refused = _from(fleet.origin, "127.30.0.1").http.post(f"{fleet.origin}/register", json=body).json()
    assert "from your address" in refused["error_description"]
    colleague = _from(fleet.origin, "127.40.0.1")
    client_id = colleague.register()  # was 429: the total of 120 spent
    tokens = colleague.tokens(client_id, LATECOMERS[0])
    assert colleague.mcp_status(tokens["access_token"]).status_code == 200


def test_junk_tokens_from_three_networks_leave_a_colleagues_new_token_alone_and_the_consent_page_spends_alike(
        fleet: Fleet, sandbox: SandboxServer) -> None:
    """About 600 junk tokens a minute from 3 addresses used to spend the checks' one total, so every token not seen
    in a week was refused; and the consent page checked any token pasted in it, outside that budget."""
    _forget_budgets(fleet)
    statuses: list[int] = []
    for network in range(3):
        flow = _from(fleet.origin, f"127.{50 + network}.0.1")
        statuses += _parallel(2 * JUNK_TOKENS, lambda i, flow=flow: flow.mcp_status(  # type: ignore[misc]
            f"tok-junk-{secrets.token_hex(12)}").status_code)
    assert statuses.count(401) == 3 * JUNK_TOKENS and statuses.count(429) == 3 * JUNK_TOKENS
    flooder, pasted = _from(fleet.origin, "127.50.0.1"), f"tok-junk-{secrets.token_hex(12)}"
    _, challenge = pkce()
    page = flooder.approve(flooder.consent_page(flooder.register(), challenge), pasted)
    assert page.status_code == 400 and "Too many unknown tokens were checked" in page.text
    assert not [record for record in sandbox.state.request_log if record.token_hash == token_hash(pasted)]
    colleague = _from(fleet.origin, "127.60.0.1")  # a network nobody signed in from yet, a token never seen
    tokens = colleague.tokens(colleague.register(), LATECOMERS[1])  # was 429 at /mcp: the total of 600 spent
    assert colleague.mcp_status(tokens["access_token"]).status_code == 200
    assert fleet.metric("agent_automation_oauth_requests_total", endpoint="consent", reason="rate_limited") >= 1


@pytest.mark.anyio
async def test_a_persons_sign_ins_with_two_tokens_share_one_tenants_listen_streams(
        fleet: Fleet, sandbox: SandboxServer) -> None:
    flow = RawFlow(fleet.other_origin)
    client_id = flow.register()
    access = {token: flow.tokens(client_id, token)["access_token"] for token in (ALICE, ALICE_CI, NEWCOMER)}
    tasks: dict[str, str] = {}
    for token, bearer in access.items():
        poller = TaskPoller(follow=False)
        async with http_client(f"{fleet.origin}/mcp", sandbox, token=bearer, extensions=[poller]) as client:
            tasks[token] = await started(client, poller)
    # On one replica, as the balancer would pass them on: one count of streams is what this test reads.
    replica = {"host": f"127.0.0.1:{fleet.port}", "x-forwarded-for": "192.0.2.10"}
    outcomes: dict[str, list[str]] = {token: [] for token in access}
    release = anyio.Event()
    with anyio.fail_after(60):
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30)) as http, anyio.create_task_group() as group:
            for request_id in range(MAX_TENANT_STREAMS):
                group.start_soon(lambda i=request_id: listen(http, fleet.replicas[0].url, access[ALICE], tasks[ALICE],
                                                             i, outcomes[ALICE], release, headers=replica))
            while len(outcomes[ALICE]) < MAX_TENANT_STREAMS:
                await anyio.sleep(0.05)
            for token in (ALICE_CI, NEWCOMER):  # one stream each, once the one before has its answer
                group.start_soon(lambda t=token: listen(http, fleet.replicas[0].url, access[t], tasks[t], 99,
                                                        outcomes[t], release, headers=replica))
                while not outcomes[token]:
                    await anyio.sleep(0.05)
            release.set()
    assert outcomes == {ALICE: ["held"] * MAX_TENANT_STREAMS, ALICE_CI: ["tenant"], NEWCOMER: ["held"]}


def test_every_signin_request_writes_one_access_line_that_holds_no_secret(fleet: Fleet) -> None:
    flow = RawFlow(fleet.other_origin)
    before = fleet.metric("agent_automation_oauth_requests_total")
    secret = secrets.token_urlsafe(24)
    confidential = flow.http.post(f"{fleet.other_origin}/register", json={
        "redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "client_secret_post"}).json()
    client_id = flow.register()
    code, verifier = flow.code(client_id, ALICE)  # authorize, consent
    tokens = flow.exchange(client_id, code, verifier).json()
    replay = flow.exchange(client_id, code, verifier)  # a spent code: invalid_grant
    assert replay.json()["error"] == "invalid_grant"
    wrong = flow.http.post(f"{fleet.other_origin}/token", data={
        "grant_type": "refresh_token", "refresh_token": tokens["refresh_token"],
        "client_id": confidential["client_id"], "client_secret": secret})
    assert wrong.status_code == 401
    assert flow.revoke(tokens["access_token"], client_id).status_code == 200
    assert flow.http.get(f"{fleet.other_origin}/.well-known/oauth-authorization-server").status_code == 200
    sent = 9  # register ×2, authorize, consent, token ×3, revoke, metadata
    assert fleet.metric("agent_automation_oauth_requests_total") == before + sent
    assert fleet.metric("agent_automation_oauth_requests_total", endpoint="token", status="400",
                        reason="invalid_grant") >= 1
    assert fleet.metric("agent_automation_oauth_requests_total", endpoint="token", status="401",
                        reason="invalid_client") >= 1
    secrets_sent = [code, verifier, tokens["access_token"], tokens["refresh_token"], confidential["client_secret"],
                    secret, ALICE]
    lines = [json.loads(line) for stderr in fleet.stop() for line in stderr.splitlines() if line.startswith("{")]
    signin = [line for line in lines if line.get("event") == "oauth"]
    assert {line["endpoint"] for line in signin} >= {"register", "authorize", "consent", "token", "revoke",
                                                     "metadata"}
    assert all(isinstance(line["status"], int) and line["reason"] for line in signin)
    text = "\n".join(json.dumps(line) for line in lines)
    assert not [value for value in secrets_sent if value in text]


def test_a_trusted_proxy_that_passes_the_clients_header_on_is_detected_and_latches_nothing(
        sandbox: SandboxServer) -> None:
    """The replica trusts 127.0.0.1, and the test, calling it directly, plays a proxy that forwards the client's
    own X-Forwarded-For untouched: the request without one is the proxy's own and is logged; the next client is
    read as ever (a latch once took every later client for the proxy, one budget for all, until a restart)."""
    server = HttpServer(clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_LOG_FORMAT="json",
                                  AGENT_AUTOMATION_TRUSTED_PROXIES="127.0.0.1"), "--auth", "request")
    try:
        for forwarded in ({"x-forwarded-for": "198.51.100.7"}, {}, {"x-forwarded-for": "198.51.100.8"}):
            assert httpx2.post(server.url, json={}, headers=forwarded, timeout=10).status_code == 401
    finally:
        stderr = server.stop()
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    clients = [line["client"] for line in lines if line.get("event") == "access"]
    assert clients == ["198.51.100.7", "127.0.0.1", "198.51.100.8"]
    assert any(line["event"] == "proxy_not_forwarding" and "does not set the header" in line["message"]
               for line in lines if line["level"] == "error")
