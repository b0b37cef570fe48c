"""Connections are bounded and counted, and refusals reach the person, behind the shipped balancer.

A flood of listening `GET /mcp` streams from one token (4,000 held the shipped HAProxy full for ~45 s) is refused
at once in both eras, so nothing is held; one address past its connection cap gets a 429 its client shows, while
other addresses are served; each replica counts its open connections and streams. The full-size flood, with the
latency of other tenants, is benchmarks/stream_flood.py.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
from contextlib import ExitStack
from pathlib import Path
from typing import Final

import anyio
import httpx2
import pytest
import test_rollouts
from harness import HttpServer, refusal_shown, tenant_client
from prometheus_client.parser import text_string_to_metric_families
from test_rollouts import Fleet, client, haproxy_binary

from agent_automation_mcp.sandbox import SandboxServer

MANIFESTS: Final = Path(__file__).resolve().parents[2] / "manifests"
FLOOD: Final = 60  # listening streams from one token at once (below the per-address cap: each reaches a replica)
ERAS: Final = {"legacy": "2025-11-25", "modern": "2026-07-28"}


# The shipped balancer in front of 3 replicas sharing Redis, as the rollout tests run it (a fleet of this module's).
sandbox, fleet = test_rollouts.sandbox, test_rollouts.fleet


def gauges(replica: HttpServer) -> dict[str, float]:
    text = httpx2.get(f"{replica.origin}/metrics", timeout=10).text
    return {sample.name: sample.value for family in text_string_to_metric_families(text) for sample in family.samples
            if sample.name in ("agent_automation_open_streams", "agent_automation_open_connections")}


def cap_per_address() -> int:
    config = (MANIFESTS / "haproxy" / "haproxy.cfg").read_text()
    return int(re.search(r"if \{ sc0_conn_cur gt (\d+) \}", config).group(1))  # type: ignore[union-attr]


def test_the_balancers_cap_each_address_and_leave_room_for_everyone_else() -> None:
    config = (MANIFESTS / "haproxy" / "haproxy.cfg").read_text()
    maxconn = {int(n) for n in re.findall(r"^\s*maxconn (\d+)", config, re.M)}
    assert len(maxconn) == 1 and "tcp-request connection track-sc0 src" in config
    assert 20 * cap_per_address() <= maxconn.pop()  # one address holds at most 5 % of the balancer
    ingress = (MANIFESTS / "kubernetes" / "ingress-nginx" / "ingress.yaml").read_text()
    assert f'nginx.ingress.kubernetes.io/limit-connections: "{cap_per_address()}"' in ingress
    done = subprocess.run([haproxy_binary(), "-c", "-f", str(MANIFESTS / "haproxy" / "haproxy.cfg")],
                          capture_output=True, text=True, timeout=30,
                          env={"MCP_BIND": "127.0.0.1:1", "REPLICA_1": "127.0.0.1:2", "REPLICA_2": "127.0.0.1:3",
                               "REPLICA_3": "127.0.0.1:4"})
    assert done.returncode == 0, done.stderr


@pytest.mark.anyio
async def test_a_flood_of_listening_streams_holds_nothing_and_other_tenants_are_served(
        fleet: Fleet, sandbox: SandboxServer) -> None:
    statuses: list[int] = []

    async def listen(http: httpx2.AsyncClient, era: str) -> None:
        headers = {"accept": "text/event-stream", "mcp-protocol-version": era,
                   "authorization": f"Bearer {sandbox.token}"}
        async with http.stream("GET", fleet.url, headers=headers) as stream:
            statuses.append(stream.status_code)  # today: 200, and the stream stays open until the client leaves
            if stream.status_code == 405:
                error = json.loads(await stream.aread())["error"]
                assert error["kind"] == "method_not_allowed" and "POST" in error["message"]

    with anyio.fail_after(60):
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(20, read=20),  # one connection per stream
                                      limits=httpx2.Limits(max_connections=FLOOD)) as http, \
                anyio.create_task_group() as group:
            for index in range(FLOOD):
                group.start_soon(listen, http, list(ERAS.values())[index % 2])
    assert statuses == [405] * FLOOD
    assert all(gauges(fleet.replica(i))["agent_automation_open_streams"] == 0 for i in range(3))
    async with client(fleet, sandbox, mode="legacy") as legacy, client(fleet, sandbox) as modern:
        for session in (legacy, modern):  # the SDK's client in either era goes on without a GET stream
            assert not (await session.call_tool("list_models", {})).is_error


@pytest.mark.anyio
async def test_a_call_is_counted_as_a_connection_and_a_stream_while_it_runs(fleet: Fleet,
                                                                            sandbox: SandboxServer) -> None:
    replica = fleet.replica(1)
    run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={"status": "ACTIVE"}, timeout=10).json()["id"]
    during: dict[str, float] = {}
    # The legacy era answers each call as a stream (SSE); the 2026-07-28 era streams only what has progress.
    async with tenant_client(replica.url, "legacy", authorization=f"Bearer {sandbox.token}",
                             x_organization_id=str(sandbox.org_id)) as session, anyio.create_task_group() as group:
        group.start_soon(session.call_tool, "get_agent_run", {"agent_run_id": run, "wait_seconds": 30})
        for _ in range(200):  # bounded: until the call is on the books
            during = await anyio.to_thread.run_sync(gauges, replica)
            if during["agent_automation_open_streams"] >= 1:
                break
            await anyio.sleep(0.05)
        group.cancel_scope.cancel()
    assert during["agent_automation_open_streams"] >= 1
    assert during["agent_automation_open_connections"] >= 2  # the call, and this scrape (no metrics port here)
    for _ in range(100):  # the client went away: the call's stream ends
        if (after := gauges(replica))["agent_automation_open_streams"] == 0:
            break
        await anyio.sleep(0.05)
    assert after == {"agent_automation_open_streams": 0, "agent_automation_open_connections": 1}


@pytest.mark.anyio
async def test_an_address_past_its_connection_cap_gets_a_429_its_client_shows(fleet: Fleet,
                                                                             sandbox: SandboxServer) -> None:
    port = int(fleet.url.rsplit(":", 1)[1].split("/")[0])
    with ExitStack() as held:
        for _ in range(cap_per_address()):  # open, sending nothing: each holds one of this address's connections
            held.enter_context(socket.create_connection(("127.0.0.1", port), timeout=10))
        refused = await refusal_shown(client(fleet, sandbox))
    assert "Too many connections at once from your address" in refused.error.message
    assert refused.error.data["retry_after_seconds"] == 5
    async with client(fleet, sandbox) as session:  # closed: the address is served again
        assert not (await session.call_tool("list_models", {})).is_error
