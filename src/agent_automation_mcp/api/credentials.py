"""Who a call is made for: an API token and, usually, an organisation."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Credentials:
    """The caller's token never shows in a repr, a log line or an error; `token_key` stands in for it."""

    token: str = field(repr=False)
    org_id: int | None = None

    def __post_init__(self) -> None:
        if not self.token or any(c.isspace() for c in self.token):
            raise ValueError("an API token must be a non-empty string without spaces")

    @property
    def token_key(self) -> str:
        """A stable, non-reversible name for the token (pacing keys, logs)."""
        return hashlib.sha256(self.token.encode()).hexdigest()[:24]

    @property
    def authorization(self) -> str:
        return f"Bearer {self.token}"
