"""How much memory this replica may use: the tightest memory limit of its cgroup and the cgroups above it (a
container's, a systemd unit's), else the machine's memory. `agent_automation_memory_limit_bytes` exports it beside
the resident memory (`process_resident_memory_bytes`), so an alert can say "70 % of the limit" whatever the limit.

cgroup v2 (`memory.max`, `max` for none) and v1 (`memory.limit_in_bytes`, a huge number for none), read from the
paths `/proc/self/cgroup` names; in a container with its own cgroup namespace that path is `/`, the mount's root.
Linux only; elsewhere None.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

CGROUP_ROOT: Final = Path("/sys/fs/cgroup")
V2_LIMIT, V1_LIMIT = "memory.max", "memory.limit_in_bytes"


def memory_limit(proc: Path = Path("/proc/self/cgroup"), root: Path = CGROUP_ROOT) -> int | None:
    """The bytes this process may hold: the smallest limit on its way up the cgroup tree, or the machine's memory;
    None where neither can be read."""
    machine = _machine_bytes()
    limits = [limit for limit in _cgroup_limits(proc, root) if machine is None or limit < machine]
    return min(limits, default=machine)


def _machine_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a POSIX system that says
        return None


def _cgroup_limits(proc: Path, root: Path) -> list[int]:
    try:
        lines = proc.read_text().splitlines()
    except OSError:
        return []
    limits = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: one hierarchy for every controller
            limits += _limits_up(root, path, V2_LIMIT)
        elif "memory" in controllers.split(","):
            limits += _limits_up(root / "memory", path, V1_LIMIT)
    return limits


def _limits_up(mount: Path, path: str, name: str) -> list[int]:
    """The limits named `name` from the cgroup at `path` up to the mount's root (a path the mount does not show,
    as from inside a container without its own cgroup namespace, counts from the root)."""
    found = []
    folder = mount / path.strip("/")
    while True:
        try:
            value = (folder / name).read_text().strip()
        except OSError:
            value = ""
        if value.isdigit():
            found.append(int(value))
        if folder == mount:
            return found
        folder = folder.parent
