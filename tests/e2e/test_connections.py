"""Connections are bounded and counted, and refusals reach the person, behind the shipped balancer.

A flood of listening `GET /mcp` streams from one token (4,000 held the shipped HAProxy full for ~45 s) is refused
at once in both eras, so nothing is held; one address past its request cap gets a 429 its client shows, and past
its connection cap has its connections refused as they open (8,000 silent sockets from one address once held the
balancer full: no request ever arrived to be refused), while other addresses are served; the balancer serves its
own metrics; each replica counts its open connections and streams. The full-size floods, with the latency of other
clients, are benchmarks/stream_flood.py and benchmarks/connection_flood.py.
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
import yaml
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


def haproxy_config() -> str:
    return (MANIFESTS / "haproxy" / "haproxy.cfg").read_text()


def cap_per_address() -> int:
    """Connections one address may have open when its request arrives; past it, 429."""
    return int(re.search(r"http-request return status 429 .* if \{ sc0_conn_cur gt (\d+) \}",  # type: ignore[union-attr]
                         haproxy_config()).group(1))


def connections_per_address() -> int:
    """Connections one address may have open at all; past it, a new one is refused as it opens."""
    return int(re.search(r"tcp-request connection reject if \{ sc0_conn_cur gt (\d+) \}",  # type: ignore[union-attr]
                         haproxy_config()).group(1))


def maxconn() -> dict[str, int]:
    """The `maxconn` of the global section and of each frontend, by name."""
    found: dict[str, int] = {}
    section = ""
    for line in haproxy_config().splitlines():
        words = line.split("#", 1)[0].split()
        if words and not line[0].isspace():
            section = "global" if words[0] == "global" else words[-1] if words[0] == "frontend" else ""
        elif words[:1] == ["maxconn"] and section:
            found[section] = int(words[1])
    return found


def test_the_balancers_cap_each_address_and_leave_room_for_everyone_else() -> None:
    config = haproxy_config()
    limits = maxconn()
    assert "tcp-request connection track-sc0 src" in config
    assert limits["mcp"] >= 20_000  # the floor: 25 × 200 idle connections once filled the 4,000 there were
    assert limits["global"] >= sum(value for name, value in limits.items() if name != "global")  # metrics stay served
    assert cap_per_address() < connections_per_address() <= limits["mcp"] // 100  # one address: at most 1 %
    assert re.search(r"^\s*timeout http-keep-alive ([1-5])s$", config, re.M)  # idle keep-alive closes within 5 s
    ingress = (MANIFESTS / "kubernetes" / "ingress-nginx" / "ingress.yaml").read_text()
    assert f'nginx.ingress.kubernetes.io/limit-connections: "{cap_per_address()}"' in ingress
    done = subprocess.run([haproxy_binary(), "-c", "-f", str(MANIFESTS / "haproxy" / "haproxy.cfg")],
                          capture_output=True, text=True, timeout=30,
                          env={"MCP_BIND": "127.0.0.1:1", "REPLICA_1": "127.0.0.1:2", "REPLICA_2": "127.0.0.1:3",
                               "REPLICA_3": "127.0.0.1:4"})
    assert done.returncode == 0, done.stderr


def haproxy_seconds(timeout: str) -> int:
    return int(re.search(rf"^\s*timeout {timeout} (\d+)s$", haproxy_config(), re.M).group(1))  # type: ignore[union-attr]


def test_the_ingress_controller_has_the_balancers_bounds_and_serves_its_metrics() -> None:
    """ingress-nginx's equivalents, in the values for its chart: idle connections closed as soon, half-sent headers
    as soon, room for the same 20,000 clients, the per-address refusal a client shows (429), and its metrics."""
    values = yaml.safe_load((MANIFESTS / "kubernetes" / "ingress-nginx" / "controller-values.yaml").read_text())
    config = values["controller"]["config"]
    assert int(config["keep-alive"]) == haproxy_seconds("http-keep-alive")
    assert int(config["client-header-timeout"]) == haproxy_seconds("http-request")
    assert int(config["max-worker-connections"]) >= 2 * 20_000  # a proxied request holds two of a worker's
    assert config["limit-conn-status-code"] == "429" and "http-request return status 429" in haproxy_config()
    assert values["controller"]["metrics"] == {"enabled": True, "serviceMonitor": {"enabled": True}}


def balancer_metrics(fleet: Fleet) -> dict[tuple[str, str], float]:
    """The mcp frontend's samples from HAProxy's own /metrics, by name and proxy."""
    text = httpx2.get(f"http://127.0.0.1:{fleet.metrics_port}/metrics", timeout=10).text
    return {(sample.name, sample.labels.get("proxy", "")): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def closed(sock: socket.socket) -> bool:
    """Whether the balancer has closed this connection (an end of stream or a reset is waiting to be read)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


@pytest.mark.anyio
async def test_silent_connections_past_an_address_cap_are_refused_as_they_open(fleet: Fleet,
                                                                                sandbox: SandboxServer) -> None:
    """One address opens 50 connections more than its cap and sends nothing on any (no request ever comes to be
    refused): the 50 are closed at once, the cap's worth stay open (until `timeout http-request`, 10 s: far longer
    than this test holds them), and other addresses are served meanwhile."""
    port = int(fleet.url.rsplit(":", 1)[1].split("/")[0])
    cap, extra = connections_per_address(), 50
    denied = ("haproxy_frontend_denied_connections_total", "mcp")
    before = balancer_metrics(fleet)[denied]
    with ExitStack() as held:
        sockets = []
        for _ in range(cap + extra):  # from 127.0.0.2: an address of its own on loopback
            sock = held.enter_context(socket.socket())
            sock.bind(("127.0.0.2", 0))
            sock.settimeout(10)
            sock.connect(("127.0.0.1", port))
            sock.setblocking(False)  # `closed` only peeks
            sockets.append(sock)
        for _ in range(100):  # bounded: until the balancer has refused what it will
            if sum(map(closed, sockets)) >= extra:
                break
            await anyio.sleep(0.05)
        assert sum(map(closed, sockets)) == extra  # which ones: those HAProxy's threads accepted last
        assert balancer_metrics(fleet)[denied] - before == extra  # counted, for the dashboard
        assert balancer_metrics(fleet)[("haproxy_frontend_current_sessions", "mcp")] >= cap
        async with client(fleet, sandbox) as session:  # another address: served as ever
            assert not (await session.call_tool("list_models", {})).is_error


def test_the_balancer_serves_every_series_the_alerts_and_dashboard_read(fleet: Fleet) -> None:
    """HAProxy's own Prometheus exporter, as the scrape config in manifests/haproxy asks for it."""
    scrape = yaml.safe_load((MANIFESTS / "haproxy" / "prometheus.yml").read_text())
    (job,) = scrape["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    text = httpx2.get(f"http://127.0.0.1:{fleet.metrics_port}{job['metrics_path']}", timeout=10).text
    served = {sample.name: set(sample.labels) for family in text_string_to_metric_families(text)
              for sample in family.samples}
    monitoring = MANIFESTS / "kubernetes" / "monitoring"
    read = "\n".join([(monitoring / "prometheusrule.yaml").read_text(), (monitoring / "dashboard.json").read_text()])
    names = set(re.findall(r"\b(haproxy_\w+)", read))
    assert names, "nothing reads the balancer's metrics"
    for name in names:
        assert name in served, f"{name} is not served by HAProxy"
    for proxy in set(re.findall(r'proxy=\\?"(\w+)', read)):  # the frontends the rules name are the config's
        assert proxy in maxconn(), proxy


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
