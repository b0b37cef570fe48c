"""The memory a replica may use, read from cgroup trees as Linux lays them out (v2 and v1), and exported beside the
memory it uses."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from agent_automation_mcp.remote.memory import _machine_bytes, memory_limit
from agent_automation_mcp.remote.metrics import Metrics

MACHINE = _machine_bytes()
MIB = 1024 * 1024


def tree(root: Path, proc: str, files: dict[str, str]) -> Path:
    """A cgroup mount at `root` holding `files` (path: content), and the /proc/self/cgroup that names `proc`."""
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)
    cgroup = root / "proc-self-cgroup"
    cgroup.write_text(proc)
    return cgroup


def test_the_tightest_limit_on_the_way_up_the_cgroup_tree_is_the_replicas(tmp_path: Path) -> None:
    v2 = tree(tmp_path / "v2", "0::/kubepods/pod1/server\n", {
        "memory.max": "max", "kubepods/memory.max": str(2048 * MIB), "kubepods/pod1/memory.max": str(512 * MIB),
        "kubepods/pod1/server/memory.max": "max"})
    assert memory_limit(v2, tmp_path / "v2") == 512 * MIB
    v1 = tree(tmp_path / "v1", "4:memory:/docker/abc\n3:cpu:/docker/abc\n", {
        "memory/memory.limit_in_bytes": "9223372036854771712", "memory/docker/abc/memory.limit_in_bytes": str(
            256 * MIB)})
    assert memory_limit(v1, tmp_path / "v1") == 256 * MIB


def test_without_a_limit_the_machines_memory_is_the_replicas(tmp_path: Path) -> None:
    namespaced = tree(tmp_path / "ns", "0::/\n", {"memory.max": "max"})  # a container's own cgroup namespace
    unlimited_v1 = tree(tmp_path / "v1", "4:memory:/gone/elsewhere\n", {
        "memory/memory.limit_in_bytes": "9223372036854771712"})  # a path the mount does not show: its root counts
    assert memory_limit(namespaced, tmp_path / "ns") == MACHINE
    assert memory_limit(unlimited_v1, tmp_path / "v1") == MACHINE
    assert memory_limit(tmp_path / "no-such-file", tmp_path) == MACHINE


def test_the_limit_is_exported_beside_the_resident_memory() -> None:
    samples = {sample.name: sample.value for family in text_string_to_metric_families(
        Metrics().exposition("reachable").decode()) for sample in family.samples}
    assert samples["agent_automation_memory_limit_bytes"] == memory_limit()
    assert 0 < samples["process_resident_memory_bytes"] < samples["agent_automation_memory_limit_bytes"]
