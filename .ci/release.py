"""Release steps that must be the same on a laptop, in CI and in the tag's workflow.

The version lives in one place, `src/agent_automation_mcp/__init__.py`; every other file that names it is
listed in COPIES, and this script is the only thing that moves them:

    python .ci/release.py version               # the version, as __init__.py says it
    python .ci/release.py check [--tag v1.2.3]  # every copy agrees (and with the tag); the CHANGELOG has it
    python .ci/release.py bump 1.2.3            # every copy moved, the Unreleased notes become 1.2.3's
    python .ci/release.py build dist/           # the sdist and wheel, built twice, byte for byte the same
    python .ci/release.py notes 1.2.3           # that version's CHANGELOG section (the GitHub release's text)
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
SOURCE: Final = "src/agent_automation_mcp/__init__.py"
VERSION_PATTERN: Final = r"\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?"
REPOSITORY: Final = "https://github.com/agent-automation/agent-automation-mcp"


@dataclass(frozen=True)
class Copy:
    """One spot in one file that repeats the version: `(?P<v>)` marks it; `count` spots must match (None: any
    number but none, for prose that may name it more or less often)."""

    path: str
    pattern: str
    count: int | None = 1

    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern.replace("(?P<v>)", f"(?P<v>{VERSION_PATTERN})"), re.M)


IMAGE: Final = r"ghcr\.io/agent-automation/agent-automation-mcp:(?P<v>)"
COPIES: Final = (
    Copy(SOURCE, r'^__version__ = "(?P<v>)"$'),
    Copy("manifests/server.json", r'^  "version": "(?P<v>)",$'),
    Copy("manifests/server.json", r'"identifier": "agent-automation-mcp",\n\s+"version": "(?P<v>)"'),
    Copy("manifests/server.json", IMAGE),
    Copy("manifests/mcpb/manifest.json", r'^  "version": "(?P<v>)",$'),
    Copy("manifests/mcpb/pyproject.toml", r'^version = "(?P<v>)"$'),
    Copy("manifests/mcpb/pyproject.toml", r'"agent-automation-mcp==(?P<v>)"'),
    Copy("manifests/mcpb/pyproject.toml", r'"wheels/agent_automation_mcp-(?P<v>)-py3-none-any\.whl"'),
    Copy("manifests/Dockerfile", r'org\.opencontainers\.image\.version="(?P<v>)"'),
    Copy("manifests/Dockerfile", IMAGE),
    Copy("manifests/kubernetes/base/kustomization.yaml", r'^    newTag: "(?P<v>)"$'),
    Copy("README.md", IMAGE, count=None),
    Copy("docs/install.md", IMAGE, count=None),
    Copy("docs/install.md", r"agent-automation-mcp-(?P<v>)\.mcpb", count=None),
)


def version(root: Path = ROOT) -> str:
    """The one version: __init__.py's `__version__`, read as text (the build backend reads it the same way)."""
    match = COPIES[0].regex().search((root / SOURCE).read_text())
    if match is None:
        raise SystemExit(f"{SOURCE} has no __version__ = \"X.Y.Z\" line")
    return match["v"]


def mismatches(root: Path = ROOT, tag: str | None = None) -> list[str]:
    """Every copy that does not say the version, each as a line a person can act on; empty when all agree."""
    expected = version(root)
    problems = [f"the tag {tag} is not v{expected}"] if tag is not None and tag != f"v{expected}" else []
    for copy in COPIES:
        found = [match["v"] for match in copy.regex().finditer((root / copy.path).read_text())]
        if len(found) != copy.count and not (copy.count is None and found):
            problems.append(f"{copy.path}: {len(found)} spots match {copy.pattern!r}, expected {copy.count or 'some'}")
        problems += [f"{copy.path}: says {seen}, not {expected} ({copy.pattern!r})"
                     for seen in found if seen != expected]
    changelog = (root / "CHANGELOG.md").read_text()
    if "\n## [Unreleased]\n" not in changelog:
        problems.append("CHANGELOG.md: no '## [Unreleased]' section")
    if not re.search(rf"^## \[{re.escape(expected)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", changelog, re.M):
        problems.append(f"CHANGELOG.md: no '## [{expected}] - YYYY-MM-DD' section")
    if f"\n[{expected}]: {REPOSITORY}/" not in changelog:
        problems.append(f"CHANGELOG.md: no link for [{expected}] at its foot")
    return problems


def _with_version(match: re.Match[str], new: str) -> str:
    """The matched text with its version spot, and only that, replaced."""
    start, end = match.start("v") - match.start(), match.end("v") - match.start()
    return match[0][:start] + new + match[0][end:]


def bump(new: str, root: Path = ROOT, today: datetime.date | None = None) -> None:
    """Every copy to `new`, and the Unreleased notes become `new`'s section, dated today, with its links."""
    if not re.fullmatch(VERSION_PATTERN, new):
        raise SystemExit(f"{new!r} is not a version like 1.2.3 or 1.2.3rc1")
    old = version(root)
    if problems := mismatches(root):
        raise SystemExit("the copies disagree before the bump:\n" + "\n".join(problems))
    changelog = (root / "CHANGELOG.md").read_text()
    if re.search(r"^## \[Unreleased\]\n\s*^## \[", changelog, re.M):
        raise SystemExit("CHANGELOG.md says nothing under Unreleased: write what this release changes first")
    for path in dict.fromkeys(copy.path for copy in COPIES):
        text = (root / path).read_text()
        for copy in (copy for copy in COPIES if copy.path == path):
            text = copy.regex().sub(lambda match: _with_version(match, new), text)
        (root / path).write_text(text)
    date = (today or datetime.datetime.now(datetime.UTC).date()).isoformat()
    changelog = changelog.replace("\n## [Unreleased]\n", f"\n## [Unreleased]\n\n## [{new}] - {date}\n", 1)
    changelog = re.sub(r"^\[Unreleased\]: .*$",
                       f"[Unreleased]: {REPOSITORY}/compare/v{new}...HEAD\n"
                       f"[{new}]: {REPOSITORY}/compare/v{old}...v{new}", changelog, count=1, flags=re.M)
    (root / "CHANGELOG.md").write_text(changelog)


def notes(wanted: str, root: Path = ROOT) -> str:
    """One version's CHANGELOG section, without its heading."""
    changelog = (root / "CHANGELOG.md").read_text()
    match = re.search(rf"^## \[{re.escape(wanted)}\][^\n]*\n(.*?)(?=^## \[|^\[Unreleased\]: )", changelog, re.M | re.S)
    if match is None:
        raise SystemExit(f"CHANGELOG.md has no section for {wanted}")
    return match[1].strip() + "\n"


def source_date_epoch(root: Path = ROOT) -> str:
    """The last commit's time: what makes two builds of one commit the same bytes, wherever they run."""
    return subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%ct"], check=True, capture_output=True,
                          text=True).stdout.strip()


def _build_once(root: Path, out: Path, epoch: str) -> dict[str, str]:
    env = {**os.environ, "SOURCE_DATE_EPOCH": epoch}
    # Without isolation: the backend installed beside `build` (requirements-build.lock in a release) builds it,
    # so nothing is downloaded and the backend's version is the one pinned.
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(root)], env=env,
                   check=True, stdout=subprocess.DEVNULL)
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(out.iterdir())}


def build(out: Path, root: Path = ROOT) -> dict[str, str]:
    """The sdist and the wheel, built twice from the same commit time; refused unless both builds match."""
    epoch = source_date_epoch(root)
    with tempfile.TemporaryDirectory() as scratch:
        first, second = Path(scratch, "first"), Path(scratch, "second")
        built = _build_once(root, first, epoch)
        again = _build_once(root, second, epoch)
        if built != again or len(built) != 2:
            raise SystemExit(f"two builds differ: {built} against {again}")
        out.mkdir(parents=True, exist_ok=True)
        for name in built:
            shutil.copy2(first / name, out / name)
    return built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=".ci/release.py", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("version", help="print the version")
    check = commands.add_parser("check", help="every copy of the version agrees")
    check.add_argument("--tag", help="the git tag being released, e.g. v1.2.3")
    commands.add_parser("bump", help="move every copy to a new version").add_argument("new")
    commands.add_parser("build", help="build the sdist and wheel reproducibly").add_argument("out", type=Path)
    commands.add_parser("notes", help="print a version's CHANGELOG section").add_argument("wanted")
    args = parser.parse_args(argv)
    if args.command == "version":
        print(version())
    elif args.command == "check":
        if problems := mismatches(tag=args.tag):
            print("\n".join(problems), file=sys.stderr)
            return 1
        print(f"{version()}: every copy agrees")
    elif args.command == "bump":
        bump(args.new)
        print(f"now {args.new}: review `git diff`, write the CHANGELOG's {args.new} notes, commit, tag v{args.new}")
    elif args.command == "build":
        for name, digest in build(args.out).items():
            print(f"{digest}  {args.out / name}")
    else:
        print(notes(args.wanted), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
