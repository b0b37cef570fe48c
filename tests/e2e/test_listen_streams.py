"""Task listen streams (`subscriptions/listen`) are shared fairly, behind the shipped HAProxy before 3 replicas on one
Redis: a handful of tokens cannot take them all, a colleague still listens, and a drain ends them at once.

Eight tokens, each from its own address and asking for more streams than a replica used to let one token hold,
once took every stream of every replica (768), and a colleague was refused 6 times in 6; a replica that drained
with streams open was held for its whole grace (60 s).
"""

from __future__ import annotations

import json
import re
import signal
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, Final

import anyio
import httpx2
import pytest
import test_rollouts
from harness import RATE_LIMITS, HttpServer
from prometheus_client.parser import text_string_to_metric_families
from test_rollouts import Fleet
from test_tasks import http_client, started

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.tasks.notify import MAX_STREAMS, MAX_TENANT_STREAMS
from task_requester import TASKS, TaskPoller

FLOODERS: Final = tuple(f"tok-listen-flood-{i}" for i in range(8))
COLLEAGUE: Final = "tok-listen-colleague"
REPLICAS: Final = 3
# Per flooding token, all at once: its eighth of every replica's streams (what it held before: 768 took them all).
WANTED: Final = REPLICAS * (MAX_STREAMS // len(FLOODERS))
COLLEAGUE_LISTENS: Final = 6
HEADERS: Final = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                  "mcp-protocol-version": "2026-07-28", "mcp-method": "subscriptions/listen"}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    config = SandboxConfig(tokens=(*FLOODERS, COLLEAGUE), run_seconds=600.0,  # runs that go on for the whole module
                           rate_limits=parse_rate_limits(RATE_LIMITS))
    with SandboxServer(config) as server:
        yield server


fleet = test_rollouts.fleet  # the shipped HAProxy before 3 replicas on one Redis, on this module's sandbox


def listen_call(task_id: str, request_id: int) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": [task_id]}, "_meta": meta}}


async def first_message(response: httpx2.Response, lines: AsyncIterator[str]) -> dict[str, Any]:
    """The first JSON-RPC message of an answer: its one JSON body, or its first server-sent event from `lines` (the
    answer's, read on by the caller after it); an answer with neither, as an error that says so."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return json.loads(await response.aread())
    async for line in lines:
        if line.startswith("data:"):
            return json.loads(line.removeprefix("data:"))
    return {"error": {"message": f"HTTP {response.status_code} without a message"}}


async def listen(http: httpx2.AsyncClient, url: str, token: str, task_id: str, request_id: int,
                 outcomes: list[str], release: anyio.Event, *, ended: list[dict[str, Any]] | None = None,
                 headers: Mapping[str, str] | None = None) -> str:
    """One listen stream: `held` once acknowledged (kept open until `release`, or until the server ends it: its last
    message in `ended`), or why it was refused: `tenant`, `replica`, or the error's message; added to `outcomes`
    as soon as it is known, and returned at the end. `headers`: more to send."""
    async with http.stream("POST", url, json=listen_call(task_id, request_id),
                           headers=HEADERS | {"authorization": f"Bearer {token}"} | dict(headers or {})) as response:
        lines = response.aiter_lines()
        first = await first_message(response, lines)
        if "error" in first:  # in a 200, or (the SDK's choice) a 4xx or 5xx
            message = first["error"]["message"]
            outcomes.append("tenant" if "streams on this replica" in message else
                            "replica" if "limit reached on this replica" in message else message)
            return outcomes[-1]
        assert first.get("method") == "notifications/subscriptions/acknowledged", first
        outcomes.append("held")
        if ended is None:
            await release.wait()
            return "held"
        async for line in lines:  # until the server ends the stream
            if line.startswith("data:"):
                ended.append(json.loads(line.removeprefix("data:")))
        return "held"


def listen_metrics(replica: HttpServer) -> dict[str, float]:
    text = httpx2.get(f"{replica.origin}/metrics", timeout=10).text
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "agent_automation_listen_refused_total":
                found[f"refused {sample.labels['reason']}"] = sample.value
            elif sample.name in ("agent_automation_listen_streams", "agent_automation_listen_streams_limit"):
                found[sample.name.removeprefix("agent_automation_")] = sample.value
    return found


async def task_of(fleet: Fleet, sandbox: SandboxServer, token: str) -> str:
    poller = TaskPoller(follow=False)
    async with http_client(fleet.url, sandbox, token=token, extensions=[poller]) as client:
        return await started(client, poller)


@pytest.mark.anyio
async def test_eight_tokens_cannot_take_the_listen_streams_and_a_colleague_still_listens(
        fleet: Fleet, sandbox: SandboxServer) -> None:
    tasks = {token: await task_of(fleet, sandbox, token) for token in (*FLOODERS, COLLEAGUE)}
    before = [listen_metrics(fleet.replica(i)) for i in range(REPLICAS)]
    flooded: dict[str, list[str]] = {token: [] for token in FLOODERS}
    colleague: list[str] = []
    release = anyio.Event()
    with anyio.fail_after(180):
        async with anyio.create_task_group() as group:
            for index, token in enumerate(FLOODERS):  # each token from an address of its own, within its cap there
                transport = httpx2.AsyncHTTPTransport(local_address=f"127.0.0.{20 + index}",
                                                      limits=httpx2.Limits(max_connections=WANTED))
                http = httpx2.AsyncClient(transport=transport, timeout=httpx2.Timeout(60))
                group.start_soon(_flood, http, fleet.url, token, tasks[token], flooded[token], release)
            while sum(map(len, flooded.values())) < len(FLOODERS) * WANTED:  # each stream held or refused
                await anyio.sleep(0.2)
            held = [listen_metrics(fleet.replica(i)) for i in range(REPLICAS)]
            for attempt in range(COLLEAGUE_LISTENS):  # each listen a new connection, round robin over the replicas
                async with httpx2.AsyncClient(timeout=httpx2.Timeout(60)) as http:
                    await _listen_once(http, fleet.url, tasks[COLLEAGUE], attempt, colleague)
            release.set()
    logs = [fleet.replica(i).stderr_so_far() for i in range(REPLICAS)]
    assert colleague == ["held"] * COLLEAGUE_LISTENS, colleague  # was: refused 6 times in 6
    for token, outcomes in flooded.items():  # (the balancer's own 503s, while the flood slows the replicas, aside)
        counts = Counter(outcomes)
        assert counts["held"] <= REPLICAS * MAX_TENANT_STREAMS and counts["tenant"] > 0, (token, counts)
        assert "replica" not in counts, (token, counts)
    assert sum(h["listen_streams"] for h in held) <= len(FLOODERS) * REPLICAS * MAX_TENANT_STREAMS
    assert all(h["listen_streams_limit"] == MAX_STREAMS for h in held)
    refused = sum(h["refused tenant"] - b["refused tenant"] for h, b in zip(held, before, strict=True))
    assert refused >= sum(Counter(outcomes)["tenant"] for outcomes in flooded.values())
    assert all(h["refused replica"] == b["refused replica"] for h, b in zip(held, before, strict=True))
    shares = [line for text in logs for line in text.splitlines()
              if re.search(rf"tenant \w+ listens on {MAX_TENANT_STREAMS} streams on this replica, its share", line)]
    assert len(shares) >= len(FLOODERS)  # each flooder, on some replica (its tenant named by HMAC, not its token)
    assert not any(token in text for text in logs for token in (*FLOODERS, COLLEAGUE))


async def _flood(http: httpx2.AsyncClient, url: str, token: str, task_id: str, outcomes: list[str],
                 release: anyio.Event) -> None:
    """`WANTED` streams at once (a connection the balancer drops counts as `dropped`)."""
    async def stream(request_id: int) -> None:
        try:
            await listen(http, url, token, task_id, request_id, outcomes, release)
        except httpx2.TransportError:
            outcomes.append("dropped")

    async with http, anyio.create_task_group() as group:
        for request_id in range(WANTED):
            group.start_soon(stream, request_id)


async def _listen_once(http: httpx2.AsyncClient, url: str, task_id: str, request_id: int,
                       outcomes: list[str]) -> None:
    """A colleague's listen: acknowledged (then left), or refused."""
    async with http.stream("POST", url, json=listen_call(task_id, request_id),
                           headers=HEADERS | {"authorization": f"Bearer {COLLEAGUE}"}) as response:
        first = await first_message(response, response.aiter_lines())
        outcomes.append("held" if first.get("method") == "notifications/subscriptions/acknowledged" else
                        f"refused {response.status_code} {first.get('error')}")


@pytest.mark.anyio
async def test_a_drain_ends_the_listen_streams_at_once(fleet: Fleet, sandbox: SandboxServer) -> None:
    """SIGTERM a replica holding listen streams: they end at once as streams that ran their course (the client
    listens again elsewhere), and the replica exits after its short minimum drain, not its 60 s grace."""
    task_id = await task_of(fleet, sandbox, COLLEAGUE)
    draining = fleet.replica(0)
    outcomes: list[str] = []
    ended: list[list[dict[str, Any]]] = [[] for _ in range(3)]
    with anyio.fail_after(30):
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(60)) as http, anyio.create_task_group() as group:
            for index in range(3):
                group.start_soon(lambda i=index: listen(http, draining.url, COLLEAGUE, task_id, i, outcomes,
                                                        anyio.Event(), ended=ended[i]))
            while len(outcomes) < 3:
                await anyio.sleep(0.05)
            draining.process.send_signal(signal.SIGTERM)
        code = await anyio.to_thread.run_sync(lambda: draining.process.wait(timeout=20))
    stderr = draining.stop()
    fleet.start(0)
    fleet.wait_until_all_up()
    assert outcomes == ["held"] * 3
    assert code == 0 and "SIGTERM: drained, exiting" in stderr and "still in flight" not in stderr, stderr[-2000:]
    for messages in ended:  # the stream's answer: complete, as when its tasks end
        assert messages and messages[-1]["result"]["resultType"] == "complete", messages
