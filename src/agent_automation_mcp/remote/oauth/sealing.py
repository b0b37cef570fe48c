"""The keys of a sign-in server: encrypting the service token of each grant, and signing consent forms.

The operator's keys (`AGENT_AUTOMATION_OAUTH_KEYS`) are Fernet keys: the first seals, every one of them
opens, so a key is rotated by putting a new one first and dropping the old one 30 days later: each refresh
re-encrypts its grant's service token under the first key, and a grant unused for 30 days has ended.
Every replica must hold the same keys, or a grant sealed by one is unreadable on the others.

A grant's service token is sealed with what the state keys alone must not change (`GrantSecret`): the grant's id,
when the sign-in was made and who made it. Whoever holds a state key can open a token and seal its contents again
under another grant id or time, but not this: a revoked grant re-sealed as a new one opens to nothing, and the
operator's ends by time and person (`cutoffs.py`) hold.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

GRANT_PREFIX: Final = "aamcp-grant-v1\n"  # a service token holds no line break: what follows is a bound grant


@dataclass(frozen=True, slots=True)
class GrantSecret:
    """What the sign-in keys seal of a grant: its service token, bound to the grant's id, start and person."""

    token: str = field(repr=False)
    grant: str | None  # the grant's id; None: sealed by an earlier release, bound at its next refresh
    issued: int  # when the sign-in was made, Unix seconds; 0 for one sealed by an earlier release
    user: int | None  # the service's id of the person who signed in, when known


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

    def seal_grant(self, secret: GrantSecret) -> str:
        """`secret` under the first key: each refresh seals its grant again, so a rotated key is left within 30 days."""
        record = {"grant": secret.grant, "issued": secret.issued, "user": secret.user, "token": secret.token}
        return self.seal(GRANT_PREFIX + json.dumps(record, separators=(",", ":")))

    def open_grant(self, sealed: str, grant_id: str) -> GrantSecret | None:
        """The secret of grant `grant_id`; None when it does not open or was sealed for another grant."""
        text = self.open(sealed)
        if text is None:
            return None
        if not text.startswith(GRANT_PREFIX):
            return GrantSecret(text, None, 0, None)
        record = json.loads(text.removeprefix(GRANT_PREFIX))
        if record["grant"] != grant_id:
            return None
        return GrantSecret(record["token"], grant_id, record["issued"], record["user"])

    def sign(self, value: str) -> str:
        return hmac.new(self._signing, value.encode(), hashlib.sha256).hexdigest()

    def signed(self, value: str, signature: str) -> bool:
        return hmac.compare_digest(self.sign(value), signature)
