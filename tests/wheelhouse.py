"""A wheelhouse made from the test environment itself, so a fresh virtualenv installs a wheel with no network.

Each distribution the wheel needs (its `Requires-Dist`, followed through their own) is already installed here;
its files, listed in its RECORD, are packed back into a wheel with the tags its WHEEL file names. pip then
installs from these with `--no-index`: the same resolution and the same dependency checks as from PyPI, at
the versions this environment has.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from importlib.metadata import Distribution, distribution
from pathlib import Path
from typing import Final

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

# What pip writes on install, not part of the wheel it came from; RECORD is written anew.
_INSTALLER_FILES: Final = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}


def _needs(requires: list[str] | None) -> list[str]:
    """The names a distribution needs without extras, on this interpreter."""
    names = []
    for line in requires or []:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.append(requirement.name)
    return names


def closure(requires: list[str]) -> list[Distribution]:
    """The installed distributions `requires` needs, directly or through one another."""
    found: dict[str, Distribution] = {}
    pending = _needs(requires)
    while pending:
        name = canonicalize_name(pending.pop())
        if name not in found:
            found[name] = distribution(name)
            pending += _needs(found[name].requires)
    return list(found.values())


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def repack(dist: Distribution, into: Path) -> Path:
    """One installed distribution as a wheel again: the files its RECORD lists inside site-packages."""
    info = next(path for path in dist.files or [] if path.name == "WHEEL" and path.parent.name.endswith(".dist-info"))
    tag = next(line.split(":", 1)[1].strip() for line in info.read_text().splitlines() if line.startswith("Tag:"))
    name = canonicalize_name(dist.metadata["Name"]).replace("-", "_")
    wheel = into / f"{name}-{dist.version}-{tag}.whl"
    record = f"{info.parent.as_posix()}/RECORD"
    lines = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as archive:
        for path in dist.files or []:
            posix = path.as_posix()
            if posix.startswith("..") or "__pycache__" in path.parts or (
                    path.parent == info.parent and path.name in _INSTALLER_FILES):
                continue  # scripts pip writes again from entry_points.txt; bytecode; pip's own notes
            data = Path(str(dist.locate_file(path))).read_bytes()
            archive.writestr(posix, data)
            lines.append(_record_line(posix, data))
        archive.writestr(record, "\n".join([*lines, f"{record},,", ""]))
    return wheel


def make(requires: list[str], into: Path) -> Path:
    """A directory of wheels for everything `requires` needs, for `pip install --no-index --find-links`."""
    into.mkdir(parents=True, exist_ok=True)
    for dist in closure(requires):
        repack(dist, into)
    return into
