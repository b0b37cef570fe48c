"""What the manifests run, run here: the image's command and its HEALTHCHECK, the Deployment's probes with a
pod's Host, and the remote URLs of server.json and the client configurations against a server in oauth mode.

No container engine or cluster here: the console script stands in for the image, on 127.0.0.1 and a free port
instead of 0.0.0.0:8000, and the sandbox for the service (the Redis URL is left out: its name is the cluster's).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import httpx2
import pytest
import yaml
from cryptography.fernet import Fernet
from harness import RATE_LIMITS, SHARED_KEYS, HttpServer, clean_env, free_port, tenant_client

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from test_manifests import MANIFESTS, REMOTE_URL, dockerfile, env_file, manifest_json, only

ONE_ORG, BOTH_ORGS = "tok-manifests-org1", "tok-manifests-both"  # the second must say which organisation
RUNTIME: Final = dockerfile()[1]
BASE: Final = MANIFESTS / "kubernetes" / "base"
DEPLOYMENT: Final = yaml.safe_load((BASE / "deployment.yaml").read_text())
(CONTAINER,) = DEPLOYMENT["spec"]["template"]["spec"]["containers"]
# The ConfigMap's data, with the organisations of the sandbox's tokens filled in as settings.env asks.
CONFIG: Final[dict[str, str]] = env_file(BASE / "settings.env") | {"AGENT_AUTOMATION_ALLOWED_ORGS": "1,2"}
PORTS: Final = {port["name"]: port["containerPort"] for port in CONTAINER["ports"]}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    config = SandboxConfig(tokens=(ONE_ORG, BOTH_ORGS), visible_orgs=2, token_orgs={ONE_ORG: (1,)},
                           run_seconds=1.0, rate_limits=parse_rate_limits(RATE_LIMITS))
    with SandboxServer(config) as server:
        yield server


def _run_here(args: list[str], env: dict[str, str]) -> HttpServer:
    """The image's entry point with a container's arguments, listening on 127.0.0.1 and a free port."""
    (entry_point,) = json.loads(only(RUNTIME, "ENTRYPOINT"))
    script = Path(sys.executable).parent / entry_point  # the console script, as on the image's PATH
    assert script.is_file(), script
    port = free_port()
    local = list(args)
    local[local.index("--host") + 1] = "127.0.0.1"
    local[local.index("--port") + 1] = str(port)
    return HttpServer(env, port=port, command=[str(script), *local])


def _stopped(server: HttpServer) -> None:
    stderr = server.stop()
    assert ONE_ORG not in stderr and BOTH_ORGS not in stderr


@pytest.fixture(scope="module")
def image(sandbox: SandboxServer) -> Iterator[HttpServer]:
    """The image's CMD; in request mode, which 0.0.0.0 chooses in the container and 127.0.0.1 must be told."""
    env = clean_env(AGENT_AUTOMATION_AUTH="request", AGENT_AUTOMATION_BASE_URL=sandbox.url,
                    AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS)
    server = _run_here(json.loads(only(RUNTIME, "CMD")), env)
    yield server
    _stopped(server)


@pytest.fixture(scope="module")
def metrics_port() -> int:
    """Where the Deployment's metrics port is served here (a free one, as for the main port)."""
    return free_port()


@pytest.fixture(scope="module")
def deployment(sandbox: SandboxServer, metrics_port: int) -> Iterator[HttpServer]:
    """The Deployment's arguments with the ConfigMap's settings and sign-in keys as the Secret holds them."""
    assert int(CONFIG["AGENT_AUTOMATION_METRICS_PORT"]) == PORTS["metrics"]
    env = clean_env(**(CONFIG | {"AGENT_AUTOMATION_METRICS_PORT": str(metrics_port)}),
                    AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS,
                    AGENT_AUTOMATION_OAUTH_KEYS=Fernet.generate_key().decode(),
                    AGENT_AUTOMATION_STATE_KEYS=SHARED_KEYS["AGENT_AUTOMATION_STATE_KEYS"])
    server = _run_here(CONTAINER["args"], env)
    yield server
    _stopped(server)


def _healthcheck(port: int) -> subprocess.CompletedProcess[bytes]:
    """The Dockerfile's HEALTHCHECK command, its port made `port`, `python` being the one on the image's PATH."""
    command = json.loads(only(RUNTIME, "HEALTHCHECK").split(" CMD ", 1)[1])
    assert command[0] == "python"
    exposed = f"127.0.0.1:{only(RUNTIME, 'EXPOSE')}/"
    assert exposed in command[-1]
    line = command[-1].replace(exposed, f"127.0.0.1:{port}/")
    return subprocess.run([sys.executable, *command[1:-1], line], capture_output=True, timeout=30,
                          stdin=subprocess.DEVNULL)


def test_the_images_command_is_alive_and_ready_and_passes_its_healthcheck(image: HttpServer) -> None:
    assert httpx2.get(f"{image.origin}/healthz", timeout=10).status_code == 200
    ready = httpx2.get(f"{image.origin}/readyz", timeout=10)
    assert ready.status_code == 200 and ready.json()["ready"] is True
    checked = _healthcheck(image.port)
    assert checked.returncode == 0, checked.stderr.decode()


def test_the_healthcheck_fails_where_nothing_answers() -> None:
    """So that the test above could fail."""
    assert _healthcheck(free_port()).returncode != 0


def test_probes_with_a_pods_address_as_host_are_answered_while_mcp_refuses_that_host(
        deployment: HttpServer) -> None:
    # The kubelet probes http://<pod IP>:<containerPort>/path, so that is the Host it sends.
    pod = {"host": f"10.244.1.17:{PORTS['http']}"}
    probes = {CONTAINER[probe]["httpGet"]["path"] for probe in ("livenessProbe", "readinessProbe", "startupProbe")}
    assert probes == {"/healthz", "/readyz"}
    answers = {path: httpx2.get(f"{deployment.origin}{path}", headers=pod, timeout=10) for path in sorted(probes)}
    mcp = httpx2.post(deployment.url, headers=pod | {"authorization": f"Bearer {ONE_ORG}"}, timeout=10,
                      json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert {path: answer.status_code for path, answer in answers.items()} == {"/healthz": 200, "/readyz": 200}
    assert answers["/readyz"].json()["ready"] is True
    assert mcp.status_code == 421  # the Host check is on: the probes pass because they are outside it


def test_metrics_are_served_on_the_metrics_port_only(deployment: HttpServer, metrics_port: int) -> None:
    """The Service exposes the http port: /metrics is not there, only on the port the NetworkPolicy keeps for the
    scraper."""
    assert httpx2.get(f"{deployment.origin}/metrics", timeout=10).status_code == 404
    scraped = httpx2.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10)
    assert scraped.status_code == 200 and "agent_automation_tool_calls_in_flight" in scraped.text


def _filled(value: str, variables: dict[str, str]) -> str:
    """A server.json value with its `{name}` variables filled in."""
    return re.sub(r"\{(\w+)\}", lambda match: variables[match.group(1)], value)


def _signs_in_at(server: HttpServer, url: str) -> None:
    """What a client given only `url` meets through a load balancer that passes the Host: a 401 that points at
    the metadata saying `url` is the resource, and an authorization server that takes it from there."""
    host = url.split("/")[2]
    refused = httpx2.post(server.url, headers={"host": host}, json={}, timeout=10)
    assert refused.status_code == 401
    metadata_url = f"{url.removesuffix('/mcp')}/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{metadata_url}"' in refused.headers["www-authenticate"]
    resource = httpx2.get(f"{server.origin}/.well-known/oauth-protected-resource/mcp", timeout=10).json()
    assert resource["resource"] == url
    (issuer,) = resource["authorization_servers"]
    metadata = httpx2.get(f"{server.origin}/.well-known/oauth-authorization-server", timeout=10).json()
    assert metadata["issuer"] == issuer and metadata["authorization_endpoint"] == f"{issuer}authorize"


def test_the_registry_entrys_remote_url_signs_in_with_oauth(deployment: HttpServer) -> None:
    (remote,) = manifest_json("server.json")["remotes"]
    asked = {header["name"].lower(): header for header in remote.get("headers", [])}
    assert "authorization" not in asked, "OAuth brings the token: the registry must not ask for one"
    assert not [name for name, header in asked.items() if header.get("isRequired")], asked
    _signs_in_at(deployment, _filled(remote["url"], {"host": REMOTE_URL.split("/")[2]}))


@pytest.mark.parametrize("file", ["cursor-mcp.json", "vscode-mcp.json"])
def test_a_client_configurations_remote_url_signs_in_with_oauth(deployment: HttpServer, file: str) -> None:
    config: dict[str, Any] = manifest_json(f"clients/{file}")
    (remote,) = [entry for entry in (config.get("mcpServers") or config["servers"]).values() if "url" in entry]
    assert "headers" not in remote
    _signs_in_at(deployment, remote["url"])


@pytest.mark.anyio
async def test_a_service_token_still_works_beside_sign_in(deployment: HttpServer, sandbox: SandboxServer) -> None:
    """As with --auth request: the token, and X-Organization-Id when it sees several organisations."""
    headers = {"authorization": f"Bearer {BOTH_ORGS}", "x_organization_id": "2", "host": REMOTE_URL.split("/")[2]}
    async with tenant_client(deployment.url, **headers) as client:
        run = await client.call_tool("create_agent_run", {"prompt": "check the manifests' headers"})
    assert not run.is_error, run.structured_content
    assert sandbox.state.world.runs[run.structured_content["id"]].organization_id == 2
