"""Sealed task ids: any replica with the keys opens them, for their own tenant only, through a key rotation."""

from __future__ import annotations

import base64

from agent_automation_mcp.tasks.ids import PREFIX, TaskRecord, TaskSeal

OLD, NEW = "o" * 40, "n" * 40
RECORD = TaskRecord(org_id=7, run_id=1234, tool="create_agent_run", created_ms=1_790_000_000_000, ttl_ms=60_000)


def test_an_id_opens_on_any_replica_with_the_keys_and_through_a_rotation() -> None:
    task_id = TaskSeal([OLD]).seal(RECORD, "tenant-a")
    assert TaskSeal([OLD]).open(task_id, "tenant-a") == RECORD
    assert TaskSeal([NEW, OLD]).open(task_id, "tenant-a") == RECORD  # mid-rotation: sealed new, opened old
    assert TaskSeal([NEW]).open(task_id, "tenant-a") is None  # the old key retired
    assert task_id.startswith(PREFIX) and "1234" not in task_id and "tenant" not in task_id


def test_another_tenant_or_an_altered_id_opens_to_nothing() -> None:
    seal = TaskSeal([OLD])
    task_id = seal.seal(RECORD, "tenant-a")
    body = bytearray(base64.urlsafe_b64decode(task_id.removeprefix(PREFIX) + "=" * (-len(task_id) % 4)))
    altered = []
    for index in (0, 12, len(body) // 2, len(body) - 1):  # nonce, ciphertext, tag
        flipped = bytearray(body)
        flipped[index] ^= 1
        altered.append(PREFIX + base64.urlsafe_b64encode(bytes(flipped)).rstrip(b"=").decode())
    assert seal.open(task_id, "tenant-b") is None
    assert [seal.open(bad, "tenant-a") for bad in altered] == [None] * 4
    assert seal.open(task_id[:-3], "tenant-a") is None and seal.open("run-task.!!", "tenant-a") is None
    assert seal.open("x" * 1000, "tenant-a") is None


def test_ids_differ_each_time_and_a_process_without_keys_opens_only_its_own() -> None:
    seal = TaskSeal([])
    first, second = seal.seal(RECORD, "tenant-a"), seal.seal(RECORD, "tenant-a")
    assert first != second and seal.open(first, "tenant-a") == seal.open(second, "tenant-a") == RECORD
    assert TaskSeal([]).open(first, "tenant-a") is None
