"""A drain finishes every call: the call budgets, the shutdown grace, the Deployment, the autoscaler and the
balancers (HAProxy, ingress-nginx) agree, each derived from the code's own constants.

The drain itself runs over real HTTP in tests/e2e/test_rollouts.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Final

import kubernetes_validate
import pytest
import yaml

from agent_automation_mcp.cli import build_parser
from agent_automation_mcp.config import DEFAULT_SHUTDOWN_GRACE, RemoteSettings, parse_state_keys
from agent_automation_mcp.remote.serve import FINAL_SHUTDOWN_SECONDS
from agent_automation_mcp.remote.verdicts import CHECK_SECONDS
from agent_automation_mcp.tools.callers import CALL_SECONDS
from agent_automation_mcp.tools.logs import PAGING_SECONDS
from agent_automation_mcp.tools.runs import MAX_WAIT_SECONDS, WAIT_MARGIN_SECONDS

MANIFESTS: Final = Path(__file__).resolve().parents[2] / "manifests"
# The longest a tool call may take: get_agent_run waiting its longest, then its last poll. Every other call
# has a shorter deadline (CALL_SECONDS; all_pages stops starting pages at PAGING_SECONDS, inside it).
LONGEST_CALL: Final = max(MAX_WAIT_SECONDS + WAIT_MARGIN_SECONDS, CALL_SECONDS, PAGING_SECONDS)
# A request may first wait for its token to be checked, then run its call.
LONGEST_REQUEST: Final = LONGEST_CALL + CHECK_SECONDS


def kustomize(folder: str) -> dict[str, dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (Debian: kubernetes-client); .ci/run installs it")
    done = subprocess.run([kubectl, "kustomize", str(MANIFESTS / "kubernetes" / folder)], capture_output=True,
                          text=True, timeout=60, check=True, stdin=subprocess.DEVNULL)
    return {document["kind"]: document for document in yaml.safe_load_all(done.stdout) if document}


def haproxy_settings() -> dict[str, list[str]]:
    """Each directive of the shipped HAProxy config, by its first word(s), with the rest of its line."""
    settings: dict[str, list[str]] = {}
    for line in (MANIFESTS / "haproxy" / "haproxy.cfg").read_text().splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            name = " ".join(words[:2]) if words[0] in ("timeout", "option") else words[0]
            settings.setdefault(name, []).append(" ".join(words[len(name.split()):]))
    return settings


def seconds(value: str) -> float:
    number, unit = re.fullmatch(r"(\d+)(ms|s|m)?", value).groups()  # type: ignore[union-attr]
    return int(number) * {"ms": 0.001, "s": 1.0, "m": 60.0, None: 0.001}[unit]


def test_the_default_grace_covers_the_longest_call() -> None:
    assert DEFAULT_SHUTDOWN_GRACE >= LONGEST_CALL + 5  # and a few seconds for its answer
    assert RemoteSettings.from_env({}).shutdown_grace == DEFAULT_SHUTDOWN_GRACE


def test_the_deployment_waits_for_the_pause_the_drain_and_the_last_second() -> None:
    deployment = kustomize("base")["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = build_parser("serve").parse_args(container["args"])
    grace = args.shutdown_grace if args.shutdown_grace is not None else DEFAULT_SHUTDOWN_GRACE
    pause = container["lifecycle"]["preStop"]["exec"]["command"]
    pause_seconds = float(re.fullmatch(r"import time; time\.sleep\((\d+)\)", pause[-1]).group(1))  # type: ignore[union-attr]
    assert grace >= LONGEST_CALL + 5
    assert pod["terminationGracePeriodSeconds"] >= pause_seconds + grace + FINAL_SHUTDOWN_SECONDS + 1
    assert "replicas" not in deployment["spec"]  # the autoscaler's


def test_the_autoscaler_scales_down_slowly() -> None:
    behavior = kustomize("base")["HorizontalPodAutoscaler"]["spec"]["behavior"]["scaleDown"]
    assert behavior["stabilizationWindowSeconds"] >= 300
    assert behavior["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 120}]


def test_haproxy_retries_refusals_elsewhere_and_waits_out_the_longest_call() -> None:
    settings = haproxy_settings()
    assert settings["retry-on"] == ["503 conn-failure"]  # nothing that could replay a call a tool has seen
    assert settings["option redispatch"] == ["1"] and int(settings["retries"][0]) >= 2
    assert "option http-buffer-request" in settings  # else the body is on its way before the 503 comes
    assert settings["option httpchk"] == ["GET /readyz"]
    for timeout in ("timeout server", "timeout client"):
        assert seconds(settings[timeout][0]) >= LONGEST_REQUEST, timeout


def test_ingress_nginx_retries_refusals_elsewhere_and_waits_out_the_longest_call() -> None:
    rendered = kustomize("ingress-nginx")
    ingress = rendered["Ingress"]
    kubernetes_validate.validate(ingress, "1.33.0", strict=True)
    annotations = {name.removeprefix("nginx.ingress.kubernetes.io/"): value
                   for name, value in ingress["metadata"]["annotations"].items()}
    assert set(annotations["proxy-next-upstream"].split()) == {"http_503", "non_idempotent"}
    assert float(annotations["proxy-read-timeout"]) >= LONGEST_REQUEST
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == rendered["Service"]["metadata"]["name"]
    assert backend["port"]["name"] == rendered["Service"]["spec"]["ports"][0]["name"]


def test_state_keys_are_a_rotation_list_of_long_keys_never_quoted() -> None:
    assert parse_state_keys(f" {'a' * 32} , {'b' * 40} ,") == ("a" * 32, "b" * 40)
    assert parse_state_keys(None) == parse_state_keys("") == ()
    with pytest.raises(ValueError, match="key 2 has 9 characters") as short:
        parse_state_keys(f"{'a' * 32},too-short")
    assert "too-short" not in str(short.value)
    with pytest.raises(ValueError, match="listed twice"):
        parse_state_keys(f"{'a' * 32},{'a' * 32}")
    settings = RemoteSettings.from_env({"AGENT_AUTOMATION_STATE_KEYS": "k" * 32})
    assert settings.state_keys == ("k" * 32,) and "k" * 32 not in repr(settings)
