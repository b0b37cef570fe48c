"""Task ids that carry their own record, sealed: any replica holding the keys answers for a task with no store.

An id is (organisation, run, tool, creation time, lifetime) sealed with the operator's `AGENT_AUTOMATION_STATE_KEYS`
(`state_seal.py`), bound to the caller's token hash: the tenant is bound without being written anywhere, so an id
presented by another token, altered in one bit, or sealed with a key this replica does not hold opens to nothing,
before anything is sent to the service.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ..state_seal import StateSeal

PREFIX: Final = "run-task."  # says what the id is to a person reading a log; not a secret
PURPOSE: Final = b"agent-automation-mcp task id v1"
MAX_ID_CHARS: Final = 400  # longer is not ours: refused before any decoding


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """What a task id says: which run of which organisation, started or resumed by which tool, when, for how long."""

    org_id: int
    run_id: int
    tool: str
    created_ms: int  # Unix milliseconds
    ttl_ms: int

    @property
    def expires_ms(self) -> int:
        return self.created_ms + self.ttl_ms


class TaskSeal:
    """Seals and opens task ids with the keys every replica shares."""

    def __init__(self, keys: Sequence[str | bytes]) -> None:
        self._seal = StateSeal(keys, PURPOSE)

    def seal(self, record: TaskRecord, tenant: str) -> str:
        payload = json.dumps([record.org_id, record.run_id, record.tool, record.created_ms, record.ttl_ms],
                             separators=(",", ":")).encode()
        return PREFIX + self._seal.seal(payload, tenant)

    def open(self, task_id: str, tenant: str) -> TaskRecord | None:
        """The record, or None for anything that is not an id this tenant was given (no detail: nothing to probe)."""
        if not task_id.startswith(PREFIX) or len(task_id) > MAX_ID_CHARS:
            return None
        payload = self._seal.open(task_id.removeprefix(PREFIX), tenant)
        if payload is None:
            return None
        org_id, run_id, tool, created_ms, ttl_ms = json.loads(payload)
        return TaskRecord(org_id, run_id, tool, created_ms, ttl_ms)


