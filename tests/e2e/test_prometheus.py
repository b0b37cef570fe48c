"""The shipped alerts and dashboard against a real Prometheus (Debian's `prometheus`, on loopback, its data in a
temporary directory) scraping three replicas' `--metrics-port` every second, and the shipped HAProxy in front of
them with the shipped scrape job, while they serve calls and sign-in requests and share Redis: every dashboard query
returns data, and when Redis is killed the Redis alert's expression turns true for every replica, and the rule
itself fires (in this test's copy of the rules, without `for`).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

import httpx2
import pytest
import yaml
from cryptography.fernet import Fernet
from harness import RATE_LIMITS, HttpServer, clean_env, free_port
from test_rollouts import shipped_balancer

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from pacing.redis_server import RedisServer

MANIFESTS: Final = Path(__file__).resolve().parents[2] / "manifests"
MONITORING: Final = MANIFESTS / "kubernetes" / "monitoring"
_MONITOR: Final = yaml.safe_load((MONITORING / "podmonitor.yaml").read_text())["spec"]
JOB: Final[str] = _MONITOR["selector"]["matchLabels"][_MONITOR["jobLabel"]]  # the job the PodMonitor names
NAMESPACE: Final = "default"
# Grafana's variables as it fills them in; $__rate_interval is at least four scrape intervals.
GRAFANA: Final = {"$__rate_interval": "10s", "$namespace": NAMESPACE}
ALICE, BOB = "tok-alice-prometheus", "tok-bob-prometheus"  # Bob's token alone meets the service's 429s
STRANGER: Final = "tok-nobody-knows-this"
REPLICAS: Final = 3
WAIT: Final = 20.0  # seconds, at most, for each thing awaited below


class Prometheus:
    """`prometheus` on a free loopback port, scraping `targets` (and `jobs`, more scrape configs) every second and
    evaluating `rules` every second."""

    def __init__(self, binary: str, work: Path, targets: list[str], rules: dict[str, Any],
                 jobs: list[dict[str, Any]]) -> None:
        (work / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
        static = [{"targets": [target], "labels": {"namespace": NAMESPACE, "pod": f"replica-{index}"}}
                  for index, target in enumerate(targets)]
        config = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                  "rule_files": ["rules.yaml"],
                  "scrape_configs": [{"job_name": JOB, "static_configs": static}, *jobs]}
        (work / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        port = free_port()
        self.origin = f"http://127.0.0.1:{port}"
        self.server = HttpServer({}, port=port, command=[
            binary, f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"])
        deadline = time.monotonic() + WAIT
        while httpx2.get(f"{self.origin}/-/ready", timeout=5).status_code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError(f"prometheus did not become ready: {self.server.stop()}")
            time.sleep(0.2)

    def query(self, expression: str) -> list[dict[str, Any]]:
        answer = httpx2.get(f"{self.origin}/api/v1/query", params={"query": expression}, timeout=10)
        assert answer.status_code == 200, (expression, answer.text)
        return answer.json()["data"]["result"]

    def until(self, expression: str, condition: Any = bool) -> list[dict[str, Any]]:
        """The expression's result once `condition` holds for it, within WAIT seconds."""
        deadline = time.monotonic() + WAIT
        while True:
            result = self.query(expression)
            if condition(result) or time.monotonic() > deadline:
                return result
            time.sleep(0.5)

    def stop(self) -> None:
        self.server.stop()


class Load:
    """Calls and sign-in requests to every replica, in a thread, until stopped (at most two minutes): successes,
    a stranger's token, a task request, the service failing (500s, then 429s to Bob's token), the OAuth endpoints."""

    def __init__(self, sandbox: SandboxServer, replicas: list[HttpServer]) -> None:
        self.sandbox = sandbox
        self.replicas = replicas
        self.stopped = threading.Event()
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self._send()
        except BaseException as exc:  # told by `stop`, in the test's thread
            self.failure = exc

    def _send(self) -> None:
        with httpx2.Client(timeout=30) as http:
            self._service_fails(http)
            deadline = time.monotonic() + 120
            while not self.stopped.is_set() and time.monotonic() < deadline:
                for replica in self.replicas:
                    call(http, replica, "list_models", ALICE)
                    call(http, replica, "list_models", STRANGER)
                    ask_task(http, replica, ALICE)
                    http.get(f"{replica.origin}/.well-known/oauth-authorization-server")
                    http.post(f"{replica.origin}/token", data={"grant_type": "refresh_token", "refresh_token": "junk",
                                                                 "client_id": "junk"})
                self.stopped.wait(0.2)

    def _service_fails(self, http: httpx2.Client) -> None:
        for faults, tool, token in (({"error_rate": 1.0, "operations": ["list_organizations"]}, "list_organizations",
                                     ALICE),
                                    ({"throttle_rate": 1.0, "operations": ["get_current_user"]}, "get_user", BOB)):
            http.put(f"{self.sandbox.url}/_sandbox/faults", json=faults).raise_for_status()
            call(http, self.replicas[0], tool, token)
        http.put(f"{self.sandbox.url}/_sandbox/faults", json={}).raise_for_status()

    def stop(self) -> None:
        """Stop sending; raises what made the load stop early, if anything did."""
        self.stopped.set()
        self.thread.join(timeout=60)
        if self.failure is not None:
            raise self.failure


def call(http: httpx2.Client, replica: HttpServer, tool: str, token: str) -> None:
    """One modern-era `tools/call`, as a client sends it."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {}, "_meta": meta}}
    http.post(replica.url, json=body, headers={
        "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call", "mcp-name": tool, "authorization": f"Bearer {token}"})


def ask_task(http: httpx2.Client, replica: HttpServer, token: str) -> None:
    """One modern-era `tasks/get` of a task that does not exist: refused, and counted as a task request."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": "made-up", "_meta": meta}}
    http.post(replica.url, json=body, headers={
        "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tasks/get", "authorization": f"Bearer {token}"})


def binary(name: str) -> str:
    """Skipped without the command on a developer's machine; in CI, where `.ci/run` installs it, a failure."""
    found = shutil.which(name)
    if found is None:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(
            f"{name} is not installed (Debian: apt-get install {name}); .ci/run installs it")
    assert found is not None
    return found


def balancer_job(target: str) -> dict[str, Any]:
    """The shipped scrape job for HAProxy (manifests/haproxy/prometheus.yml), pointed at `target`."""
    (job,) = yaml.safe_load((MANIFESTS / "haproxy" / "prometheus.yml").read_text())["scrape_configs"]
    return {**job, "scrape_interval": "1s", "static_configs": [{"targets": [target]}]}


def shipped_rules() -> list[dict[str, Any]]:
    return yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())["spec"]["groups"]


def alert(name: str) -> dict[str, Any]:
    (rule,) = [rule for group in shipped_rules() for rule in group["rules"] if rule.get("alert") == name]
    return rule


def dashboard_queries() -> dict[str, str]:
    """Each panel's queries, by panel title and refId, with Grafana's variables filled in."""
    queries = {}
    for panel in json.loads((MONITORING / "dashboard.json").read_text())["panels"]:
        for target in panel["targets"]:
            expression = target["expr"]
            for variable, value in GRAFANA.items():
                expression = expression.replace(variable, value)
            queries[f"{panel['title']} [{target['refId']}]"] = expression
    return queries


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    config = SandboxConfig(tokens=(ALICE, BOB), run_seconds=1.0, rate_limits=parse_rate_limits(RATE_LIMITS))
    with SandboxServer(config) as server:
        yield server


def test_prometheus_sees_the_dashboard_s_data_and_the_redis_alert_when_redis_dies(sandbox: SandboxServer,
                                                                                   tmp_path: Path) -> None:
    prometheus_binary = binary("prometheus")
    redis = RedisServer(binary("redis-server"))
    redis.start()
    started: list[HttpServer] = []
    prometheus = load = balancer = None
    try:
        env = clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS,
                        AGENT_AUTOMATION_REDIS_URL=redis.url, AGENT_AUTOMATION_TOOLSETS="all",
                        AGENT_AUTOMATION_TIMEOUT="2", AGENT_AUTOMATION_OAUTH_KEYS=Fernet.generate_key().decode(),
                        AGENT_AUTOMATION_STATE_KEYS="s" * 40, AGENT_AUTOMATION_LOG_SECRET="l" * 40)
        ports = [(free_port(), free_port()) for _ in range(REPLICAS)]  # each replica's, and its metrics port
        # The test's copy of the rules: as shipped, but firing at once (no `for`) so the test need not wait minutes.
        groups = [{**group, "rules": [{k: v for k, v in rule.items() if k != "for"} for rule in group["rules"]]}
                  for group in shipped_rules()]
        balancer_port, balancer_metrics = free_port(), free_port()
        balancer = shipped_balancer(f"127.0.0.1:{balancer_port}", balancer_port, [port for port, _ in ports],
                                    balancer_metrics)
        with ThreadPoolExecutor(REPLICAS + 1) as pool:  # all four start at once
            replicas = [pool.submit(HttpServer, env, "--auth", "oauth", "--public-url", f"http://127.0.0.1:{port}",
                                    "--metrics-port", str(metrics_port), port=port) for port, metrics_port in ports]
            scraper = pool.submit(Prometheus, prometheus_binary, tmp_path,
                                  [f"127.0.0.1:{metrics_port}" for _, metrics_port in ports], {"groups": groups},
                                  [balancer_job(f"127.0.0.1:{balancer_metrics}")])
        started = [replica.result() for replica in replicas if replica.exception() is None]
        prometheus = scraper.result() if scraper.exception() is None else None
        for future in (*replicas, scraper):
            if (failure := future.exception()) is not None:
                raise failure
        assert prometheus is not None
        load = Load(sandbox, started)

        up = prometheus.until(f'sum(up{{job="{JOB}"}})', lambda result: result and result[0]["value"][1] == "3")
        assert up and up[0]["value"][1] == "3", up
        redis_down = alert("AgentAutomationRedisDown")["expr"]
        # Redis answers: the alert's expression is false on every replica. Waited for: a command that outlasts its
        # 1 s timeout on a starved machine makes a replica say "unreachable" until its next try, which the shipped
        # rule's `for: 2m` (left out here) lets pass.
        assert prometheus.until(redis_down, lambda result: result == []) == []

        # Every dashboard query returns data once the load has been scraped.
        empty = dashboard_queries()
        deadline = time.monotonic() + WAIT
        while empty and time.monotonic() < deadline:
            empty = {title: query for title, query in empty.items() if not prometheus.query(query)}
            time.sleep(0.5)
        assert load.failure is None and not empty, (f"no data for {sorted(empty)}", load.failure)
        namespaces = httpx2.get(f"{prometheus.origin}/api/v1/label/namespace/values", timeout=10, params={
            "match[]": "agent_automation_tool_calls_in_flight"}).json()["data"]  # the namespace variable's query
        assert namespaces == [NAMESPACE]

        assert redis.process is not None
        redis.process.kill()
        down = prometheus.until(redis_down, lambda result: len(result) == REPLICAS)
        assert sorted(series["metric"]["pod"] for series in down) == [f"replica-{i}" for i in range(REPLICAS)]
        firing = prometheus.until('ALERTS{alertname="AgentAutomationRedisDown", alertstate="firing"}',
                                  lambda result: len(result) == REPLICAS)
        assert {series["metric"]["severity"] for series in firing} == {"critical"} and len(firing) == REPLICAS
    finally:
        if load is not None:
            load.stop()
        if prometheus is not None:
            prometheus.stop()
        for replica in started:
            replica.stop()
        if balancer is not None:
            balancer.stop()
        redis.stop()
