"""Sealing with the keys every replica shares (`AGENT_AUTOMATION_STATE_KEYS`), so that what a request needs later
travels with the client instead of living in one replica or in Redis: task ids, and the tokens and client ids
of sign-ins.

AES-256-GCM under a key of one purpose, derived by HKDF from each operator key: what is sealed for one purpose
never opens as another. The first key seals, every key opens (rotation: docs/rollouts.md); without keys, a key
this process draws (one replica, until it restarts). What a value is bound to (a tenant, a resource) is
associated data: not written in the value, which opens only when the same binding is presented; a value altered
in one bit, or sealed with a key this replica does not hold, opens to nothing.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Sequence
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

NONCE_BYTES: Final = 12
TAG_BYTES: Final = 16


class StateSeal:
    """Seals and opens values of one purpose with the keys every replica shares."""

    def __init__(self, keys: Sequence[str | bytes], purpose: bytes) -> None:
        ring = list(keys) or [os.urandom(32)]
        self._ciphers = [AESGCM(_derived(key, purpose)) for key in ring]

    def seal(self, payload: bytes, bound: str) -> str:
        """`payload` sealed, as URL-safe base64 without padding (fit for a URL, a header or a form)."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = nonce + self._ciphers[0].encrypt(nonce, payload, bound.encode())
        return base64.urlsafe_b64encode(sealed).rstrip(b"=").decode()

    def open(self, text: str, bound: str) -> bytes | None:
        """The payload, or None for anything this seal did not make for `bound` (no detail: nothing to probe)."""
        try:
            sealed = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            return None
        nonce, data = sealed[:NONCE_BYTES], sealed[NONCE_BYTES:]
        if len(data) < TAG_BYTES:
            return None
        for cipher in self._ciphers:
            try:
                return cipher.decrypt(nonce, data, bound.encode())
            except (InvalidTag, ValueError):
                continue
        return None


def sealed_chars(payload_bytes: int) -> int:
    """How long a payload of `payload_bytes` is once sealed: what bounds on sealed values derive from."""
    return -(-(NONCE_BYTES + payload_bytes + TAG_BYTES) * 4 // 3)


def _derived(key: str | bytes, purpose: bytes) -> bytes:
    material = key.encode() if isinstance(key, str) else key
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose).derive(material)
