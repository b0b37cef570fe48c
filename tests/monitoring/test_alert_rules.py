"""The shipped alerts, evaluated by Prometheus' own promtool: the PrometheusRule's groups pass `promtool check rules`,
and each alert has unit tests here (one file per alert, promtool's test format) that fire it on the series that
should and keep it silent on a healthy day.

An expected alert in those files gives its labels and summary; this module adds the alert's description (static
text, the runbook line) before promtool compares them, so that each file reads as its case and nothing else.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

ROOT: Final = Path(__file__).resolve().parents[2]
RULE: Final = ROOT / "manifests" / "kubernetes" / "monitoring" / "prometheusrule.yaml"
UNIT_TESTS: Final = sorted(Path(__file__).parent.glob("*.yaml"))


def promtool() -> str:
    """Skipped without promtool on a developer's machine; in CI, where `.ci/run` installs it, a failure."""
    binary = shutil.which("promtool")
    if binary is None:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(
            "promtool is not installed (Debian: apt-get install prometheus); .ci/run installs it")
    assert binary is not None
    return binary


def rule_groups() -> list[dict[str, Any]]:
    """The groups of the shipped PrometheusRule: what a rules file holds."""
    return yaml.safe_load(RULE.read_text())["spec"]["groups"]


def alerts() -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for group in rule_groups() for rule in group["rules"] if "alert" in rule}


def write_rules(directory: Path) -> Path:
    path = directory / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule_groups()}, sort_keys=False))
    return path


def with_descriptions(unit_test: dict[str, Any]) -> dict[str, Any]:
    """`unit_test` reading the extracted rules file, each expected alert with its rule's description added."""
    described = copy.deepcopy(unit_test)
    described["rule_files"] = ["rules.yaml"]
    rules = alerts()
    for group in described["tests"]:
        for case in group.get("alert_rule_test", []):
            for expected in case.get("exp_alerts") or []:
                annotations = expected.setdefault("exp_annotations", {})
                annotations.setdefault("description", rules[case["alertname"]]["annotations"]["description"])
    return described


def run_unit_test(unit_test: dict[str, Any], directory: Path) -> subprocess.CompletedProcess[str]:
    write_rules(directory)
    path = directory / "unit_test.yaml"
    path.write_text(yaml.safe_dump(with_descriptions(unit_test), sort_keys=False))
    return subprocess.run([promtool(), "test", "rules", path.name], cwd=directory, capture_output=True, text=True,
                          timeout=60, check=False)


def test_promtool_accepts_the_shipped_rules(tmp_path: Path) -> None:
    checked = subprocess.run([promtool(), "check", "rules", str(write_rules(tmp_path))], capture_output=True,
                             text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in checked.stdout
    for alert in alerts().values():  # a description is the runbook line, copied as it is into expected alerts
        assert "{{" not in alert["annotations"]["description"]


def test_promtool_accepts_the_balancers_scrape_config() -> None:
    """The job that scrapes HAProxy's own exporter (tests/e2e/test_prometheus.py scrapes a running one with it)."""
    checked = subprocess.run([promtool(), "check", "config", str(ROOT / "manifests" / "haproxy" / "prometheus.yml")],
                             capture_output=True, text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("path", UNIT_TESTS, ids=[path.stem for path in UNIT_TESTS])
def test_promtool_unit_test(path: Path, tmp_path: Path) -> None:
    tested = run_unit_test(yaml.safe_load(path.read_text()), tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_alert_has_a_unit_test_that_fires_it_and_one_that_keeps_it_silent() -> None:
    fired: set[str] = set()
    silent: set[str] = set()
    for path in UNIT_TESTS:
        for group in yaml.safe_load(path.read_text())["tests"]:
            for case in group.get("alert_rule_test", []):
                (fired if case.get("exp_alerts") else silent).add(case["alertname"])
    assert fired == set(alerts()), f"no unit test fires {sorted(set(alerts()) - fired)}"
    assert silent == set(alerts()), f"no unit test keeps {sorted(set(alerts()) - silent)} silent"


def test_a_wrong_expectation_fails_the_unit_test(tmp_path: Path) -> None:
    """So that the unit tests above could fail: the Redis alert expected silent where it fires."""
    unit_test = yaml.safe_load((Path(__file__).parent / "redis_down.yaml").read_text())
    for group in unit_test["tests"]:
        for case in group.get("alert_rule_test", []):
            case["exp_alerts"] = [] if case.get("exp_alerts") else [{"exp_labels": {"severity": "critical"}}]
    tested = run_unit_test(unit_test, tmp_path)
    assert tested.returncode != 0 and "FAILED" in tested.stdout + tested.stderr


def test_the_operations_guide_says_what_each_alert_means_and_what_to_do() -> None:
    rows = re.findall(r"^\| `(AgentAutomation\w+)` \|(.+)$", (ROOT / "docs" / "operations.md").read_text(), re.M)
    assert [name for name, _ in rows] == list(alerts())  # in the rules' order
    assert all(len([cell for cell in row.split("|") if cell.strip()]) == 3 for _, row in rows)  # when, severity, do
    for name, row in rows:
        assert alerts()[name]["labels"]["severity"] in row
