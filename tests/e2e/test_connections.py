"""Connections are bounded and counted, and refusals reach the person, behind the shipped balancer.

A flood of listening `GET /mcp` streams from one token (4,000 held the shipped HAProxy full for ~45 s) is refused
at once in both eras, so nothing is held; one address past its request cap gets a 429 its client shows, and past
its connection cap has its connections refused as they open (8,000 silent sockets from one address once held the
balancer full: no request ever arrived to be refused), as has one network past its own (its addresses each under
theirs), while other addresses are served; the ingress counts networks as the balancer does; the balancer serves
its own metrics and writes an access line; each replica counts its open connections and streams. The full-size
floods, with the latency of other clients, are benchmarks/stream_flood.py and benchmarks/connection_flood.py.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import random
import re
import socket
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Final

import anyio
import httpx2
import pytest
import test_rollouts
import yaml
from harness import HttpServer, free_port, refusal_shown, tenant_client
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


def connections_per_network() -> int:
    """Connections one network (/24, /64) may have open at all; past it, a new one is refused as it opens."""
    return int(re.search(r"tcp-request connection reject if \{ sc1_conn_cur gt (\d+) \}",  # type: ignore[union-attr]
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
    # One network (its /24, or /64 for IPv6: one host holds a whole /64) holds at most 1000, a few addresses' worth:
    # 340 addresses in two /24s once timed calls out; a /24 capped at 1000 brought a colleague's call back to 52 ms.
    assert "tcp-request connection track-sc1 src,ipmask(24,64) table per_network" in config
    assert connections_per_address() < connections_per_network() == 1000
    assert re.search(r"^\s*log stdout format raw local0 info$", config, re.M)  # an access line per request
    assert re.search(r"^\s*option httplog$", config, re.M)
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


def test_the_balancer_writes_an_access_line_per_request(tmp_path: Path) -> None:
    """On stdout, for the container's log collector: who asked what, the status and how it ended; no token."""
    port, metrics_port = free_port(), free_port()
    env = {"MCP_BIND": f"127.0.0.1:{port}", "METRICS_BIND": f"127.0.0.1:{metrics_port}",
           **{f"REPLICA_{i}": f"127.0.0.1:{free_port()}" for i in (1, 2, 3)}}  # none listening: 503
    with (tmp_path / "stdout").open("w+") as out:
        balancer = subprocess.Popen([haproxy_binary(), "-db", "-n", "4000", "-f",  # -n: within any file limit
                                     str(MANIFESTS / "haproxy" / "haproxy.cfg")],
                                    env=env, stdout=out, stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):  # bounded: until it listens
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
                time.sleep(0.05)
            answer = httpx2.post(f"http://127.0.0.1:{port}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                 headers={"authorization": "Bearer tok-never-logged"}, timeout=10)
            httpx2.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10)  # scrapes are not logged
            for _ in range(100):
                out.seek(0)
                if "POST /mcp" in out.read():
                    break
                time.sleep(0.05)
        finally:
            balancer.terminate()
            balancer.wait(timeout=10)
        out.seek(0)
        lines = out.read().splitlines()
    assert answer.status_code == 503
    (line,) = [line for line in lines if "/mcp" in line or "/metrics" in line]
    logged = r"^127\.0\.0\.1:\d+ \[.+\] mcp replicas/\S+ [-\d/]+ 503 \d+ .* \"POST /mcp HTTP/1\.1\"$"
    assert re.search(logged, line), line
    assert "tok-never-logged" not in "\n".join(lines)


def network_of_text(rules: list[re.Pattern[str]], address: str) -> str:
    """What the ingress's map names an address's network: the first rule's `net`, else the address itself."""
    for rule in rules:
        if (match := rule.match(address)) is not None:
            return match.group("net")
    return address


def test_the_ingress_counts_each_network_as_the_balancer_does() -> None:
    """nginx cannot mask an address: its map reads the network from the address's text. Each /24 is one name; no
    name ever stands for two /64s, and a /64 has at most three (where its zeros fall decides how it is written)."""
    values = yaml.safe_load((MANIFESTS / "kubernetes" / "ingress-nginx" / "controller-values.yaml").read_text())
    snippet = values["controller"]["config"]["http-snippet"]
    assert f"limit_conn agent_automation_network {connections_per_network()};" in snippet
    rules = [re.compile(rule.replace("(?<", "(?P<")) for rule in re.findall(r'"~(.+?)"\s+\$net;', snippet)]
    assert network_of_text(rules, "203.0.113.7") == network_of_text(rules, "::ffff:203.0.113.250") == "203.0.113"
    rng = random.Random(64)
    named: dict[str, set[ipaddress.IPv6Network]] = {}
    for _ in range(20_000):  # groups drawn from few values, zeros most, so every way of compressing comes up
        groups = [rng.choice((0, 0, 0, 1, 5, 0xDB8, 0xFFFF)) for _ in range(8)]
        address = ipaddress.IPv6Address(":".join(f"{group:x}" for group in groups))
        if address.ipv4_mapped is None:  # written as nginx writes it (RFC 5952: str() does the same)
            named.setdefault(network_of_text(rules, str(address)), set()).add(
                ipaddress.IPv6Network(f"{address}/64", strict=False))
    assert all(len(networks) == 1 for networks in named.values()), "a name that stands for two /64s"
    names_per_network: dict[ipaddress.IPv6Network, int] = {}
    for networks in named.values():
        for network in networks:
            names_per_network[network] = names_per_network.get(network, 0) + 1
    assert max(names_per_network.values()) <= 3 and len(names_per_network) > 500


def balancer_metrics(fleet: Fleet) -> dict[tuple[str, str], float]:
    """The mcp frontend's samples from HAProxy's own /metrics, by name and proxy."""
    text = httpx2.get(f"http://127.0.0.1:{fleet.metrics_port}/metrics", timeout=10).text
    return {(sample.name, sample.labels.get("proxy", "")): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def silent(held: ExitStack, port: int, sources: list[str]) -> list[socket.socket]:
    """A connection to the balancer from each of `sources`, sending nothing, held until `held` closes."""
    sockets = []
    for source in sources:
        sock = held.enter_context(socket.socket())
        sock.bind((source, 0))
        sock.settimeout(10)
        with contextlib.suppress(ConnectionResetError):  # refused so fast the handshake's end reads it
            sock.connect(("127.0.0.1", port))
        sock.setblocking(False)  # `closed` only peeks
        sockets.append(sock)
    return sockets


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
        sockets = silent(held, port, ["127.0.0.2"] * (cap + extra))  # an address of its own on loopback
        for _ in range(100):  # bounded: until the balancer has refused what it will
            if sum(map(closed, sockets)) >= extra:
                break
            await anyio.sleep(0.05)
        assert sum(map(closed, sockets)) == extra  # which ones: those HAProxy's threads accepted last
        assert balancer_metrics(fleet)[denied] - before == extra  # counted, for the dashboard
        assert balancer_metrics(fleet)[("haproxy_frontend_current_sessions", "mcp")] >= cap
        async with client(fleet, sandbox) as session:  # another address: served as ever
            assert not (await session.call_tool("list_models", {})).is_error


@pytest.mark.anyio
async def test_silent_connections_past_a_network_cap_are_refused_each_address_under_its_own(
        fleet: Fleet, sandbox: SandboxServer) -> None:
    """Five addresses of one /24 open 210 connections each, under their own cap, and send nothing: those past the
    network's 1000 are closed at once, and another network is served meanwhile."""
    port = int(fleet.url.rsplit(":", 1)[1].split("/")[0])
    cap, per_address, addresses = connections_per_network(), 210, 5
    extra = per_address * addresses - cap
    assert per_address < connections_per_address() and extra > 0
    with ExitStack() as held:  # 127.0.9.0/24: a network of its own on loopback
        sockets = silent(held, port, [f"127.0.9.{index % addresses + 1}" for index in range(addresses * per_address)])
        for _ in range(100):  # bounded: until the balancer has refused what it will
            if sum(map(closed, sockets)) >= extra:
                break
            await anyio.sleep(0.05)
        assert sum(map(closed, sockets)) == extra
        async with client(fleet, sandbox) as session:  # 127.0.0.1: another network, served as ever
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
