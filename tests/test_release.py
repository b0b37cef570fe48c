"""What a release ships, built and run here as the tag's workflow builds it (.github/workflows/release.yml).

`.ci/release.py build` makes the sdist and the wheel twice from the last commit's time and refuses them unless
the two builds are the same bytes; the wheel then goes into an empty virtualenv (no source tree on the path,
its dependencies from a wheelhouse made of this environment, no network) and runs the demo from a directory of
its own; manifests/mcpb/build.sh packs the MCP Bundle around that same wheel. The version's copies are checked,
moved and caught when one is missed, as RELEASING.md says.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Callable
from email.parser import Parser
from importlib.metadata import version as installed_version
from pathlib import Path
from types import ModuleType
from typing import Final

import pytest

import agent_automation_mcp
import wheelhouse
from test_manifests import MCPB, PACKAGE, mcpb_cli  # noqa: F401  (mcpb_cli: the pinned mcpb CLI, a fixture)

ROOT: Final = Path(__file__).resolve().parent.parent
VERSION: Final = agent_automation_mcp.__version__
WHEEL_NAME: Final = f"agent_automation_mcp-{VERSION}-py3-none-any.whl"
SDIST_NAME: Final = f"agent_automation_mcp-{VERSION}.tar.gz"
# pip as the machine's settings would not have it: no extra index, no find-links, no constraints.
PIP_ENV: Final = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _load_release() -> ModuleType:
    spec = importlib.util.spec_from_file_location("release", ROOT / ".ci" / "release.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["release"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


release: Final = _load_release()


# --- one version ----------------------------------------------------------------------------------------------

def test_every_copy_of_the_version_agrees_with_the_package() -> None:
    assert release.version() == VERSION == installed_version(PACKAGE)  # hatch reads __init__.py: one place
    assert release.mismatches() == []
    assert "dynamic" in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _copy_of_the_versioned_files(into: Path) -> Path:
    for relative in {*(copy.path for copy in release.COPIES), "CHANGELOG.md"}:
        (into / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / relative, into / relative)
    return into


def test_a_missed_copy_or_a_wrong_tag_is_named(tmp_path: Path) -> None:
    root = _copy_of_the_versioned_files(tmp_path)
    assert release.mismatches(root, tag="v9.9.9") == [f"the tag v9.9.9 is not v{VERSION}"]
    manifest = root / "manifests/mcpb/manifest.json"
    manifest.write_text(manifest.read_text().replace(f'"version": "{VERSION}"', '"version": "9.9.9"'))
    assert release.mismatches(root) == [f"manifests/mcpb/manifest.json: says 9.9.9, not {VERSION} "
                                        f"({release.COPIES[4].pattern!r})"]
    dockerfile = root / "manifests/Dockerfile"
    dockerfile.write_text(re.sub(r"org\.opencontainers\.image\.version=\S+", "", dockerfile.read_text()))
    assert any(problem.startswith("manifests/Dockerfile: 0 spots") for problem in release.mismatches(root))


def test_bump_moves_every_copy_and_turns_the_unreleased_notes_into_the_version(tmp_path: Path) -> None:
    root = _copy_of_the_versioned_files(tmp_path)
    changelog = root / "CHANGELOG.md"
    if not re.search(r"^## \[Unreleased\]\n\s*^## \[", changelog.read_text(), re.M):
        changelog.write_text(re.sub(r"(?<=^## \[Unreleased\]\n).*?(?=^## \[)", "", changelog.read_text(),
                                    count=1, flags=re.M | re.S))
    with pytest.raises(SystemExit, match="nothing under Unreleased"):
        release.bump("0.2.0", root)  # a release without notes is refused
    changelog.write_text(changelog.read_text().replace("## [Unreleased]\n", "## [Unreleased]\n\n- A new thing.\n"))
    release.bump("0.2.0", root, today=datetime.date(2027, 1, 2))
    assert release.version(root) == "0.2.0" and release.mismatches(root, tag="v0.2.0") == []
    for copy in release.COPIES:  # nothing the bump touched still says the old version
        assert all(match["v"] == "0.2.0" for match in copy.regex().finditer((root / copy.path).read_text()))
    assert release.notes("0.2.0", root) == "- A new thing.\n"
    assert "## [Unreleased]\n\n## [0.2.0] - 2027-01-02\n" in changelog.read_text()
    assert f"[0.2.0]: {release.REPOSITORY}/compare/v{VERSION}...v0.2.0" in changelog.read_text()
    with pytest.raises(SystemExit):
        release.bump("0.3", root)


def test_no_file_names_the_version_outside_the_copies_the_bump_moves() -> None:
    """A new file that repeats the version must join release.COPIES, or the next bump would leave it behind."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git work tree to list the project's files")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    histories = {"CHANGELOG.md", "RELEASING.md"}  # past versions, and examples
    missed = []
    for relative in sorted(set(tracked) - histories):
        path = ROOT / relative
        if not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        text = path.read_text(errors="replace")
        moved = [match.span("v") for copy in release.COPIES if copy.path == relative
                 for match in copy.regex().finditer(text)]
        for found in re.finditer(rf"(?<![\d.]){re.escape(VERSION)}(?![\d.])", text):
            if not any(start <= found.start() and found.end() <= end for start, end in moved):
                missed.append(f"{relative}:{text.count(chr(10), 0, found.start()) + 1}")
    assert missed == [], "add these to COPIES in .ci/release.py"


def test_the_changelog_has_this_versions_notes() -> None:
    notes = release.notes(VERSION)
    assert notes.count("\n- ") >= 5 and "### Added" in notes


# --- the build, the wheel in an empty virtualenv, the bundle around it ----------------------------------------

@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release's sdist and wheel, as the workflow builds them (two builds, compared by the script)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git work tree: the build's time is the last commit's")
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, str(ROOT / ".ci" / "release.py"), "build", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_build_is_one_sdist_and_one_wheel_stamped_with_the_commits_time(dist: Path) -> None:
    assert sorted(path.name for path in dist.iterdir()) == sorted([SDIST_NAME, WHEEL_NAME])
    stamp = datetime.datetime.fromtimestamp(int(release.source_date_epoch()), datetime.UTC)
    with zipfile.ZipFile(dist / WHEEL_NAME) as wheel:
        # Every entry dated by SOURCE_DATE_EPOCH (to a zip's two seconds), not by the clock: why two builds agree.
        dated = {datetime.datetime(*entry.date_time, tzinfo=datetime.UTC) for entry in wheel.infolist()}
        assert len(dated) == 1 and datetime.timedelta(0) <= stamp - dated.pop() < datetime.timedelta(seconds=2)
        assert {name.split("/")[0] for name in wheel.namelist()} == {"agent_automation_mcp",
                                                                    f"agent_automation_mcp-{VERSION}.dist-info"}


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty virtualenv with the wheel installed by pip, offline, and what it needs: its python."""
    with zipfile.ZipFile(dist / WHEEL_NAME) as wheel:
        metadata = Parser().parsestr(wheel.read(f"agent_automation_mcp-{VERSION}.dist-info/METADATA").decode())
    house = wheelhouse.make(metadata.get_all("Requires-Dist") or [], tmp_path_factory.mktemp("wheelhouse"))
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-index",
                           "--find-links", str(house), "--no-compile", str(dist / WHEEL_NAME)],
                          env=PIP_ENV, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    return python


def _isolated() -> dict[str, str]:
    """The environment without anything that would lead Python to this source tree or this virtualenv."""
    return {name: value for name, value in os.environ.items()
            if name not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not name.startswith("AGENT_AUTOMATION_")}


def test_the_wheel_installed_alone_runs_the_demo_from_elsewhere(installed: Path, tmp_path: Path) -> None:
    where = "import agent_automation_mcp; print(agent_automation_mcp.__file__)"
    imported = subprocess.run([str(installed), "-c", where], cwd=tmp_path, env=_isolated(), capture_output=True,
                              text=True, timeout=60, check=True)
    assert Path(imported.stdout.strip()).is_relative_to(installed.parent.parent)  # the venv's copy, not src/
    demo = subprocess.run([str(installed.parent / "agent-automation-mcp"), "demo", "--run-seconds", "0.5"],
                          cwd=tmp_path, env=_isolated(), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "→ create_agent_run(" in demo.stdout and "✗ Error [not_found] (HTTP 404)" in demo.stdout
    assert "\nDone in " in demo.stdout


def test_the_readme_says_today_what_this_test_does_and_after_the_release_what_the_workflow_publishes() -> None:
    """The README's install lines: today's are the steps above (build, install the wheel, demo); the later ones
    name what release.yml publishes (PyPI's package, the image's tag)."""
    readme = (ROOT / "README.md").read_text()
    today, later = (re.search(rf"^\*\*{heading}\*\*.*?```bash\n(.*?)```", readme, re.M | re.S)[1]  # type: ignore[index]
                    for heading in ("Today", "After the first release"))
    assert re.search(r"python -m build\b.*\n.*pip install dist/\*\.whl\n.*agent-automation-mcp demo\n$", today)
    assert f"pip install {PACKAGE}" in later and f"uvx {PACKAGE}" in later
    assert f"ghcr.io/agent-automation/{PACKAGE}:{VERSION}" in later


def test_the_bundle_is_packed_around_the_same_wheel(mcpb_cli: Callable[..., object], dist: Path, installed: Path,  # noqa: F811
                                                    tmp_path: Path) -> None:
    env = {**os.environ, "npm_config_offline": "true"}
    done = subprocess.run([str(MCPB / "build.sh"), str(dist / WHEEL_NAME), str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    with zipfile.ZipFile(tmp_path / f"{PACKAGE}-{VERSION}.mcpb") as bundle:
        assert sorted(bundle.namelist()) == ["manifest.json", "pyproject.toml", "server/main.py",
                                             f"wheels/{WHEEL_NAME}"]
        assert bundle.read(f"wheels/{WHEEL_NAME}") == (dist / WHEEL_NAME).read_bytes()
        assert json.loads(bundle.read("manifest.json")) == json.loads((MCPB / "manifest.json").read_text())
        project = tomllib.loads(bundle.read("pyproject.toml").decode())
        bundle.extractall(tmp_path / "unpacked")
    assert project["tool"]["uv"]["sources"][PACKAGE] == {"path": f"wheels/{WHEEL_NAME}"}
    assert project["project"]["dependencies"] == [f"{PACKAGE}=={VERSION}"]
    # The bundle's entry point, run by the wheel's install: what the host's uv starts.
    started = subprocess.run([str(installed), "server/main.py", "--version"], cwd=tmp_path / "unpacked",
                             env=_isolated(), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert started.stdout.strip() == f"{PACKAGE} {VERSION}", started.stderr


def test_the_bundle_script_refuses_a_wheel_the_bundle_does_not_name(tmp_path: Path) -> None:
    other = tmp_path / "agent_automation_mcp-9.9.9-py3-none-any.whl"
    other.write_bytes(b"not installed")
    done = subprocess.run([str(MCPB / "build.sh"), str(other), str(tmp_path)], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and f"installs {WHEEL_NAME}, not {other.name}" in done.stderr
    assert not list(tmp_path.glob("*.mcpb"))
