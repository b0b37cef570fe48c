"""Task ids that carry their own record, sealed: any replica holding the keys answers for a task with no store.

An id is AES-GCM over (organisation, run, tool, creation time, lifetime), with the caller's token hash as associated
data: the tenant is bound without being written anywhere, so an id presented by another token, altered in one bit,
or sealed with a key this replica does not hold opens to nothing, before anything is sent to the service. The keys
are the operator's `AGENT_AUTOMATION_STATE_KEYS` (the first seals, every one opens: rotation), each stretched by HKDF
to a key of this use alone; without them, a key of this process (one replica).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

PREFIX: Final = "run-task."  # says what the id is to a person reading a log; not a secret
_INFO: Final = b"agent-automation-mcp task id v1"
_NONCE_BYTES: Final = 12
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
        ring = list(keys) or [os.urandom(32)]
        self._ciphers = [AESGCM(_derived(key)) for key in ring]

    def seal(self, record: TaskRecord, tenant: str) -> str:
        payload = json.dumps([record.org_id, record.run_id, record.tool, record.created_ms, record.ttl_ms],
                             separators=(",", ":")).encode()
        nonce = os.urandom(_NONCE_BYTES)
        sealed = nonce + self._ciphers[0].encrypt(nonce, payload, tenant.encode())
        return PREFIX + base64.urlsafe_b64encode(sealed).rstrip(b"=").decode()

    def open(self, task_id: str, tenant: str) -> TaskRecord | None:
        """The record, or None for anything that is not an id this tenant was given (no detail: nothing to probe)."""
        if not task_id.startswith(PREFIX) or len(task_id) > MAX_ID_CHARS:
            return None
        body = task_id.removeprefix(PREFIX)
        try:
            sealed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (binascii.Error, ValueError):
            return None
        nonce, data = sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:]
        for cipher in self._ciphers:
            try:
                payload = cipher.decrypt(nonce, data, tenant.encode())
            except (InvalidTag, ValueError):
                continue
            org_id, run_id, tool, created_ms, ttl_ms = json.loads(payload)
            return TaskRecord(org_id, run_id, tool, created_ms, ttl_ms)
        return None


def now_ms() -> int:
    """Unix milliseconds: the clock of task records and readings."""
    return int(time.time() * 1000)


def _derived(key: str | bytes) -> bytes:
    material = key.encode() if isinstance(key, str) else key
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(material)
