"""Every error class, the retry policy and the logs-path fallback, against the sandbox over loopback."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest

from agent_automation_mcp.api import OPERATIONS, AgentAutomationClient, ApiTransport, Credentials
from agent_automation_mcp.api import errors as e
from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.api.operations import parse_bucket_map
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.api.transport import MAX_RATE_LIMIT_RETRIES
from agent_automation_mcp.pacing import create_pacer
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.sandbox.config import Faults, LogsPaths
from sandbox_faults import set_faults

from .conftest import requests_log, settings_for

pytestmark = pytest.mark.anyio


@pytest.fixture
def faults_off(sandbox: SandboxServer) -> Iterator[SandboxServer]:
    yield sandbox
    set_faults(sandbox)  # back to the defaults: no faults


def _calls(sandbox: SandboxServer, operation: str, since: int) -> list[dict[str, Any]]:
    return [r for r in requests_log(sandbox)[since:] if r.get("operation") == operation]


def _client(transport: ApiTransport, sandbox: SandboxServer, **credentials: Any) -> AgentAutomationClient:
    values = {"token": sandbox.token, "org_id": sandbox.org_id, **credentials}
    return AgentAutomationClient(transport, Credentials(**values)).within(20)


async def test_401_403_404_422_map_to_typed_errors(sandbox: SandboxServer) -> None:
    async with ApiTransport(settings_for(sandbox)) as transport:
        with pytest.raises(e.AuthenticationError) as unauthorized:
            await _client(transport, sandbox, token="not-a-known-token").list_repositories()
        assert unauthorized.value.status == 401 and "not-a-known-token" not in repr(unauthorized.value)
        assert "not-a-known-token" not in str(unauthorized.value)

        with pytest.raises(e.PermissionDeniedError) as forbidden:
            await _client(transport, sandbox, org_id=sandbox.org_id + 1000).list_repositories()
        assert forbidden.value.status == 403 and forbidden.value.message

        with pytest.raises(e.NotFoundError) as missing:
            await _client(transport, sandbox).get_agent_run(987654321)
        assert missing.value.status == 404 and missing.value.message

        # Bypass the client's own validation to see how the service's 422 comes back.
        with pytest.raises(e.ValidationFailedError) as invalid:
            await transport.send(OPERATIONS["create_agent_run"], Credentials(sandbox.token, sandbox.org_id),
                                 json={"repo_id": "not a number"})
        assert invalid.value.status == 422
        assert invalid.value.details and {"loc", "msg", "type"} <= set(invalid.value.details[0])
        assert "prompt" in invalid.value.message

        with pytest.raises(e.ConfigurationError):
            await _client(transport, sandbox, org_id=None).list_repositories()


async def test_400_and_402() -> None:
    with SandboxServer(SandboxConfig(seed=3, max_runs=1)) as sandbox:
        async with ApiTransport(settings_for(sandbox)) as transport:
            client = _client(transport, sandbox)
            with pytest.raises(e.BadRequestError) as bad:
                await client.analyze_sandbox_logs(sandbox.app.state.world.sandbox_without_logs)
            assert bad.value.status == 400
            repo = (await client.list_repositories()).items[0]
            await client.create_agent_run("first", repo.id)
            with pytest.raises(e.QuotaExceededError) as quota:
                await client.create_agent_run("second", repo.id)
            assert quota.value.status == 402


async def test_edit_pr_needs_write_permission_and_success_false_is_an_error(sandbox: SandboxServer) -> None:
    world = sandbox.app.state.world
    async with ApiTransport(settings_for(sandbox)) as transport:
        client = _client(transport, sandbox)
        with pytest.raises(e.PermissionDeniedError):
            await client.edit_pull_request(world.read_only_pr_id, "closed")
        with pytest.raises(e.OperationFailedError) as failed:
            await client.edit_pull_request(world.merged_pr_id, "open")
        assert failed.value.status == 200 and failed.value.message


async def test_429_without_pacing_is_retried_inside_the_budget_then_reported_with_retry_after() -> None:
    config = SandboxConfig(seed=1, rate_limits=parse_rate_limits("standard=2/30s"), retry_after=True)
    with SandboxServer(config) as sandbox:
        async with ApiTransport(settings_for(sandbox)) as transport:
            client = AgentAutomationClient(transport, Credentials(sandbox.token, sandbox.org_id)).within(2)
            await client.list_repositories()
            await client.list_repositories()
            with pytest.raises(e.RateLimitError) as limited:
                await client.list_repositories()
        assert limited.value.status == 429 and limited.value.retry_after and limited.value.retry_after > 2
        statuses = [r["status"] for r in requests_log(sandbox)]
        assert statuses.count(429) == 1  # the wait did not fit the budget, so no blind retry was sent


async def test_429_is_retried_for_a_create_when_the_wait_fits() -> None:
    config = SandboxConfig(seed=1, rate_limits=parse_rate_limits("agent_creation=1/1s"), retry_after=True)
    with SandboxServer(config) as sandbox:
        async with ApiTransport(settings_for(sandbox)) as transport:
            client = _client(transport, sandbox)
            repo = (await client.list_repositories()).items[0]
            first = await client.create_agent_run("one", repo.id)
            second = await client.create_agent_run("two", repo.id)
        assert first.id != second.id
        creates = [r["status"] for r in requests_log(sandbox) if r.get("operation") == "create_agent_run"]
        assert creates.count(429) >= 1 and creates.count(200) == 2


async def test_429_without_retry_after_backs_off_then_reports_a_wait() -> None:
    """The real service sends no Retry-After: the pacer backs off on its own, a bounded number of times."""
    config = SandboxConfig(seed=1, rate_limits=parse_rate_limits("standard=2/30s"), retry_after=False)
    with SandboxServer(config) as sandbox:
        settings = settings_for(sandbox)  # our view: the published 60/30s, so the server's 429 is unexpected
        async with ApiTransport(settings, create_pacer(settings)) as transport:
            client = AgentAutomationClient(transport, Credentials(sandbox.token, sandbox.org_id)).within(3)
            await client.list_repositories()
            await client.list_repositories()
            with pytest.raises(e.RateLimitError) as limited:
                await client.list_repositories()
        statuses = [r["status"] for r in requests_log(sandbox)]
    assert limited.value.status == 429 and limited.value.retry_after and limited.value.retry_after >= 1
    assert statuses[:2] == [200, 200] and set(statuses[2:]) == {429}
    assert 2 <= len(statuses[2:]) <= 1 + MAX_RATE_LIMIT_RETRIES  # retried after a pause, never in a tight loop


async def test_server_errors_retry_reads_but_never_a_create(faults_off: SandboxServer) -> None:
    sandbox = faults_off
    async with ApiTransport(settings_for(sandbox)) as transport:
        client = _client(transport, sandbox)
        repo = (await client.list_repositories()).items[0]

        set_faults(sandbox, error_rate=1.0, operations=["list_repositories", "create_agent_run"])
        mark = len(requests_log(sandbox))
        with pytest.raises(e.ServerError) as server_error:
            await client.list_repositories()
        assert server_error.value.status == 500
        assert len(_calls(sandbox, "list_repositories", mark)) == 3  # first try and two retries

        mark = len(requests_log(sandbox))
        with pytest.raises(e.OutcomeUnknownError) as unknown:
            await client.create_agent_run("do not duplicate me", repo.id)
        assert unknown.value.kind == "outcome_unknown" and "get or list" in unknown.value.hint
        assert len(_calls(sandbox, "create_agent_run", mark)) == 1


async def test_a_single_attempt_client_sends_a_read_once_whatever_its_end(faults_off: SandboxServer) -> None:
    """For the gate's token check: a failing service sees one request per check, not three."""
    sandbox = faults_off
    async with ApiTransport(settings_for(sandbox)) as transport:
        client = _client(transport, sandbox).single_attempt()
        for faults in ({"error_rate": 1.0}, {"throttle_rate": 1.0}):
            set_faults(sandbox, **faults, operations=["get_current_user"])
            mark = len(requests_log(sandbox))
            with pytest.raises((e.ServerError, e.RateLimitError)):
                await client.get_current_user()
            assert len(_calls(sandbox, "get_current_user", mark)) == 1, faults
        set_faults(sandbox)
        assert (await client.get_current_user()).id


async def test_a_create_that_timed_out_was_sent_exactly_once(faults_off: SandboxServer) -> None:
    sandbox = faults_off
    async with ApiTransport(settings_for(sandbox, timeout=0.3)) as transport:
        client = _client(transport, sandbox)
        repo = (await client.list_repositories()).items[0]
        set_faults(sandbox, latency=1.0, operations=["create_agent_run", "get_agent_run"])
        mark = len(requests_log(sandbox))
        with pytest.raises(e.OutcomeUnknownError):
            await client.create_agent_run("slow create", repo.id)
        with pytest.raises(e.ApiTimeoutError):
            await client.get_agent_run(1)
        set_faults(sandbox)
        with anyio.move_on_after(20):  # the slow handlers finish (1 s each, or longer on a busy machine) and are logged
            while len(_calls(sandbox, "get_agent_run", mark)) < 3:
                await anyio.sleep(0.05)
    assert len(_calls(sandbox, "create_agent_run", mark)) == 1
    assert len(_calls(sandbox, "get_agent_run", mark)) == 3


async def test_dropped_connections_and_malformed_bodies(faults_off: SandboxServer) -> None:
    sandbox = faults_off
    async with ApiTransport(settings_for(sandbox)) as transport:
        client = _client(transport, sandbox)
        repo = (await client.list_repositories()).items[0]
        set_faults(sandbox, drop_rate=1.0, operations=["create_agent_run"])
        mark = len(requests_log(sandbox))
        with pytest.raises(e.OutcomeUnknownError):
            await client.create_agent_run("dropped", repo.id)
        assert len(_calls(sandbox, "create_agent_run", mark)) == 1

        set_faults(sandbox, malformed_rate=1.0, operations=["list_models", "create_agent_run"])
        with pytest.raises(e.UnexpectedResponseError) as malformed:
            await client.list_models()
        assert malformed.value.kind == "bad_response"
        # A write answered 200 with a broken body happened: the error must not invite a blind repeat.
        mark = len(requests_log(sandbox))
        with pytest.raises(e.OutcomeUnknownError) as garbled:
            await client.create_agent_run("garbled answer", repo.id)
        assert garbled.value.status == 200 and "get or list" in garbled.value.hint
        assert [r["status"] for r in _calls(sandbox, "create_agent_run", mark)] == [200]


async def test_unreachable_service() -> None:
    settings = ApiSettings(token="t", org_id=1, base_url="http://127.0.0.1:9", timeout=1)
    async with ApiTransport(settings) as transport:
        client = AgentAutomationClient(transport, Credentials("t", 1)).within(5)
        with pytest.raises(e.ConnectionFailedError) as failed:
            await client.get_agent_run(1)
    assert failed.value.kind == "connection"


@pytest.mark.parametrize(("served", "paths_seen"), [
    ("alpha", ["/v1/alpha/", "/v1/alpha/"]),  # like the real service: no request wasted on the contract's path
    ("contract", ["/v1/alpha/", "/v1/organizations/", "/v1/organizations/"]),  # one probe, then remembered
])
async def test_logs_go_to_the_alpha_path_first_and_fall_back_once(served: LogsPaths, paths_seen: list[str]) -> None:
    with SandboxServer(SandboxConfig(seed=2, logs_paths=served)) as sandbox:
        async with ApiTransport(settings_for(sandbox)) as transport:
            client = _client(transport, sandbox)
            run_id = (await client.list_agent_runs(limit=1)).items[0].id
            await client.get_agent_run_logs(run_id, limit=5)
            await client.get_agent_run_logs(run_id, limit=5, skip=5)
        paths = [r["path"] for r in requests_log(sandbox) if "/logs" in r["path"]]
        assert len(paths) == len(paths_seen) and all(p.startswith(s) for p, s in zip(paths, paths_seen, strict=True))


async def test_a_missing_run_on_the_alpha_path_is_not_a_missing_route(sandbox: SandboxServer) -> None:
    mark = len(requests_log(sandbox))
    async with ApiTransport(settings_for(sandbox)) as transport:
        with pytest.raises(e.NotFoundError):
            await _client(transport, sandbox).get_agent_run_logs(987654321)
    paths = [r["path"] for r in requests_log(sandbox)[mark:] if "/logs" in r["path"]]
    assert paths == [f"/v1/alpha/organizations/{sandbox.org_id}/agent/run/987654321/logs"]


@pytest.mark.parametrize(("entries", "pages"), [(250, [100, 100, 50]), (200, [100, 100]), (0, [0])])
async def test_paging_stops_on_a_short_page_and_never_reads_past_total(entries: int, pages: list[int]) -> None:
    with SandboxServer(SandboxConfig(seed=4)) as sandbox:
        async with ApiTransport(settings_for(sandbox)) as transport:
            run = httpx2.post(f"{sandbox.url}/_sandbox/runs",
                              json={"log_entries": entries, "status": "COMPLETE"}).json()
            client = _client(transport, sandbox)
            sizes = [len(page.logs) async for page in client.iter_agent_run_logs(run["id"], limit=100)]
        assert sizes == pages
        assert len([r for r in requests_log(sandbox) if "/logs" in r["path"]]) == len(pages)


async def test_the_configured_bucket_map_decides_what_a_request_is_charged_to(sandbox: SandboxServer) -> None:
    settings = settings_for(sandbox, rate_limits=parse_rate_limits("pr_edit=1/30s"),
                            bucket_map=parse_bucket_map("get_agent_run=pr_edit"))
    mark = len(requests_log(sandbox))
    async with ApiTransport(settings, create_pacer(settings)) as transport:
        client = AgentAutomationClient(transport, Credentials(sandbox.token, sandbox.org_id)).within(2)
        run_id = sandbox.app.state.world.run_with_pr_id
        await client.get_agent_run(run_id)
        with pytest.raises(e.RateLimitError) as paced:
            await client.get_agent_run(run_id)  # the pacer, not the service, holds this one back
        await client.list_repositories()  # not mapped: still only the standard bucket
    assert paced.value.status is None and paced.value.retry_after and paced.value.retry_after > 2
    assert len(_calls(sandbox, "get_agent_run", mark)) == 1


class _EchoingService(http.server.BaseHTTPRequestHandler):
    """A service that quotes the caller's Authorization header back, with hidden controls and at length, and
    accepts any POST with a 202 whose body is not what the operation answers."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"[]")

    def do_GET(self) -> None:
        status = 422 if "users" in self.path else 400
        said = f"{'y' * 190} token {self.headers['Authorization']} refused \u202egnp.exe\u202c {'x' * 5000}"
        body = {"detail": [{"loc": ["query", "limit"], "msg": said, "input": said}] * 50} if status == 422 \
            else {"message": said}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def echoing_service() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EchoingService)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join(5)


async def test_errors_quote_a_short_visible_excerpt_and_never_the_token(echoing_service: str) -> None:
    token = "tok-echoed-back-0123456789"
    async with ApiTransport(ApiSettings(token=token, org_id=1, base_url=echoing_service, timeout=5.0)) as transport:
        client = AgentAutomationClient(transport, Credentials(token, 1)).within(10)
        with pytest.raises(e.BadRequestError) as bad:
            await client.get_agent_run(5)
        with pytest.raises(e.ValidationFailedError) as invalid:
            await client.list_users()
    for error in (bad.value, invalid.value):
        shown = f"{error.message} {error.details} {error.hint}"
        assert token[:6] not in shown  # not even the part before a cut
        assert "\u202e" not in shown and "\u202c" not in shown
        assert len(error.message) <= 250
    assert len(invalid.value.details) <= 20 and all("input" not in item for item in invalid.value.details)


async def test_a_success_status_with_the_wrong_body_is_reported_with_that_status(echoing_service: str) -> None:
    async with ApiTransport(ApiSettings(token="t", org_id=1, base_url=echoing_service, timeout=5.0)) as transport:
        with pytest.raises(e.OutcomeUnknownError) as unknown:
            await AgentAutomationClient(transport, Credentials("t", 1)).within(10).create_agent_run("x")
    assert unknown.value.status == 202 and "answered 202" in unknown.value.message
    assert "200" not in unknown.value.message and "Check with a get or list call" in unknown.value.hint


async def test_a_retry_after_that_leaves_no_time_for_the_request_is_answered_at_once() -> None:
    """The pacer's rule for the transport's own waits too: a 429 whose wait leaves under a second of the budget is
    reported at once with the wait, not slept through and then failed."""
    config = SandboxConfig(seed=1, faults=Faults(throttle_rate=1.0, throttle_retry_after=1.5,
                                                   operations=frozenset({"list_repositories"})))
    with SandboxServer(config) as sandbox:
        async with ApiTransport(settings_for(sandbox)) as transport:
            client = _client(transport, sandbox).within(2.0)  # 1.5 s fits before a bare attempt, not before 1 s more
            with pytest.raises(e.RateLimitError) as limited:
                await client.list_repositories()
        assert limited.value.retry_after == 1.5
        assert [r["status"] for r in requests_log(sandbox)].count(429) == 1  # not slept through and sent again
