"""Pacing against short windows, over loopback: a send frees its slot a window after its answer, and after a
sliding-window counter's 429 one probe at a time goes until one is let through. Counts and orderings, not speed."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import pytest

from agent_automation_mcp.api import AgentAutomationClient, ApiTransport, Credentials
from agent_automation_mcp.api.limits import DEFAULT_RATE_LIMITS, RateLimit
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.pacing import create_pacer
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from schedstat import Mark

pytestmark = pytest.mark.anyio

BUDGET = 20.0  # seconds per call


@dataclass
class Exchange:
    sent: float  # time.monotonic() as the request left
    answered: float = float("inf")  # as its answer's head came back
    status: int | None = None


class Wire:
    """Every request of the transport's own HTTP client, as it left and as its answer came back."""

    def __init__(self) -> None:
        self.exchanges: list[Exchange] = []
        self._open: dict[int, Exchange] = {}

    async def request(self, request: httpx2.Request) -> None:
        self._open[id(request)] = exchange = Exchange(time.monotonic())
        self.exchanges.append(exchange)

    async def response(self, response: httpx2.Response) -> None:
        exchange = self._open.pop(id(response.request))
        exchange.answered, exchange.status = time.monotonic(), response.status_code


def settings_for(sandbox: SandboxServer, redis_url: str | None, limit: RateLimit, margin: float) -> ApiSettings:
    return ApiSettings(token=sandbox.token, org_id=sandbox.org_id, base_url=sandbox.url, timeout=5.0,
                       redis_url=redis_url, rate_margin=margin, rate_limits={**DEFAULT_RATE_LIMITS, "standard": limit})


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def redis_url(request: pytest.FixtureRequest) -> str | None:
    if request.param == "memory":
        return None
    redis = request.getfixturevalue("redis_server")
    redis.flush()
    return str(redis.url)


@pytest.fixture
def sliding_log_server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(rate_limits={"standard": RateLimit(4, 1.0)}, seed=5)) as server:
        yield server


@pytest.fixture
def counter_server() -> Iterator[SandboxServer]:
    """The service as it is: a sliding-window counter without Retry-After, and round trips longer than the
    spacing after a 429 (10 per 2 s: 0.22 s apart; 0.4 s to answer)."""
    config = SandboxConfig(rate_limits={"standard": RateLimit(10, 2.0)}, algorithm="sliding-counter",
                           retry_after=False, seed=3)
    with SandboxServer(config) as server:
        httpx2.put(f"{server.url}/_sandbox/faults", json={"latency": 0.4}).raise_for_status()
        yield server


@pytest.fixture
async def wired() -> AsyncIterator[tuple[Wire, httpx2.AsyncClient]]:
    wire = Wire()
    async with httpx2.AsyncClient(event_hooks={"request": [wire.request], "response": [wire.response]}) as http:
        yield wire, http


async def test_a_send_frees_its_slot_a_window_after_its_answer_not_after_the_margin(
        sliding_log_server: SandboxServer, redis_url: str | None,
        wired: tuple[Wire, httpx2.AsyncClient]) -> None:
    limit, margin = RateLimit(4, 1.0), 2.0  # twice the window: departure + margin would cut the rate to a third
    sandbox, (_, http) = sliding_log_server, wired
    settings = settings_for(sandbox, redis_url, limit, margin)
    run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={}).json()["id"]
    httpx2.delete(f"{sandbox.url}/_sandbox/requests").raise_for_status()
    http.base_url = httpx2.URL(sandbox.url)
    async with ApiTransport(settings, create_pacer(settings), http=http) as transport:
        client = AgentAutomationClient(transport, Credentials(sandbox.token, sandbox.org_id)).within(BUDGET)
        started = Mark()
        with anyio.fail_after(BUDGET):
            async with anyio.create_task_group() as tg:
                for _ in range(12):
                    tg.start_soon(client.get_agent_run, run)
        ended = Mark()

    stamps = sorted(r.time for r in sandbox.request_log if r.operation == "get_agent_run")
    assert len(stamps) == 12 and all(r.status == 200 for r in sandbox.request_log)  # no 429
    gaps = [later - earlier for earlier, later in zip(stamps, stamps[limit.count:], strict=False)]
    # Each send N places on waited for the answer to the one before plus the window, not for its departure plus
    # the window plus the margin (3 s). The slack: half a second of round trip, and whatever the threads were kept
    # waiting for a CPU meanwhile on a busy machine.
    waited = ended.at - started.at - started.ran_until(ended)
    assert max(gaps) < limit.window + margin / 4 + waited, (gaps, waited)


async def test_after_a_counter_429_no_send_is_in_flight_beside_a_probe(
        counter_server: SandboxServer, redis_url: str | None, wired: tuple[Wire, httpx2.AsyncClient]) -> None:
    sandbox, (wire, http) = counter_server, wired
    settings = settings_for(sandbox, redis_url, RateLimit(10, 2.0), 0.05)
    run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={}).json()["id"]
    http.base_url = httpx2.URL(sandbox.url)
    async with ApiTransport(settings, create_pacer(settings), http=http) as transport:
        client = AgentAutomationClient(transport, Credentials(sandbox.token, sandbox.org_id)).within(BUDGET)

        async def caller() -> None:
            while True:
                await client.get_agent_run(run)

        with anyio.move_on_after(15):  # the load stops 3 s after the first 429 (in about 4 s)
            async with anyio.create_task_group() as tg:
                for _ in range(10):
                    tg.start_soon(caller)
                while not any(e.status == 429 for e in wire.exchanges):
                    await anyio.sleep(0.05)
                await anyio.sleep(3)
                tg.cancel_scope.cancel()

    done = [e for e in wire.exchanges if e.status is not None]
    refused = [e for e in done if e.status == 429]
    assert refused, "the counter never refused: the scenario did not happen"
    probes = 0
    for no in refused:
        # After a 429 is back, sends go one at a time until one is let through.
        for probe in [e for e in done if e.sent > no.answered]:
            beside = [e for e in wire.exchanges
                      if e is not probe and e.sent < probe.answered and e.answered > probe.sent]
            assert not beside, f"{len(beside)} sends in flight beside a probe"
            probes += 1
            if probe.status != 429:
                break
    assert probes >= 1


async def test_the_transports_own_http_client_is_made_before_its_first_send_is_paced(
        sliding_log_server: SandboxServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Making the client takes a while (its imports, the CA certificates): made between the pacer's stamp and the
    request, it would have the service count a first window's sends later than the pacer does."""
    sandbox, events = sliding_log_server, []
    made = httpx2.AsyncClient

    class Recorded(made):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            events.append("client made")
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(httpx2, "AsyncClient", Recorded)
    settings = settings_for(sandbox, None, RateLimit(4, 1.0), 0.1)
    pacer = create_pacer(settings)
    acquire = pacer.acquire

    async def paced(*args: Any, **kwargs: Any) -> Any:
        events.append("paced")
        return await acquire(*args, **kwargs)

    monkeypatch.setattr(pacer, "acquire", paced)
    async with ApiTransport(settings, pacer) as transport:
        await AgentAutomationClient(transport, Credentials(sandbox.token, sandbox.org_id)).within(BUDGET).list_models()
    assert events[:2] == ["client made", "paced"]
