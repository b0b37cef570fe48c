"""The keys of a sign-in server: encrypting the service token of each grant, and signing consent forms.

The operator's keys (`AGENT_AUTOMATION_OAUTH_KEYS`) are Fernet keys: the first seals, every one of them
opens, so a key is rotated by putting a new one first and dropping the old one 30 days later: each refresh
re-encrypts its grant's service token under the first key, and a grant unused for 30 days has ended.
Every replica must hold the same keys, or a grant sealed by one is unreadable on the others.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence

from cryptography.fernet import Fernet, InvalidToken, MultiFernet


class Sealer:
    def __init__(self, keys: Sequence[str]) -> None:
        if not keys:
            raise ValueError("AGENT_AUTOMATION_OAUTH_KEYS: at least one key is needed")
        fernets = []
        for position, key in enumerate(keys, 1):
            try:
                fernets.append(Fernet(key.encode()))
            except (ValueError, TypeError):
                raise ValueError(f"AGENT_AUTOMATION_OAUTH_KEYS: key {position} is not a Fernet key (32 random bytes "
                                "in URL-safe base64, as Fernet.generate_key() prints)") from None
        self._fernet = MultiFernet(fernets)
        # Consent forms are signed with a key derived from the first, so the sealing key itself signs nothing.
        self._signing = hmac.new(base64.urlsafe_b64decode(keys[0]), b"consent-form", hashlib.sha256).digest()

    @classmethod
    def ephemeral(cls) -> Sealer:
        """A key that lives as long as the process: a loopback server run without configured keys."""
        return cls([Fernet.generate_key().decode()])

    def seal(self, value: str) -> str:
        return self._fernet.encrypt(value.encode()).decode()

    def open(self, sealed: str, max_age: float | None = None) -> str | None:
        """The value, or None when it was not sealed with one of the keys, was altered, or is older than `max_age`."""
        try:
            ttl = None if max_age is None else int(max_age)
            return self._fernet.decrypt(sealed.encode(), ttl=ttl).decode()
        except (InvalidToken, ValueError, UnicodeError):
            return None

    def reseal(self, sealed: str) -> str | None:
        """`sealed` under the first key (what a rotation needs of a value that lives on); None if it does not open."""
        try:
            return self._fernet.rotate(sealed.encode()).decode()
        except (InvalidToken, ValueError, UnicodeError):
            return None

    def sign(self, value: str) -> str:
        return hmac.new(self._signing, value.encode(), hashlib.sha256).hexdigest()

    def signed(self, value: str, signature: str) -> bool:
        return hmac.compare_digest(self.sign(value), signature)
