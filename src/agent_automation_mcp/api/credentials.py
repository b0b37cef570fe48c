"""Who a call is made for: an API token and, usually, an organisation."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache


@lru_cache(maxsize=1024)  # a remote request makes its caller's credentials several times (gate, call, access line)
def _token_key(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class Credentials:
    """The caller's token never shows in a repr, a log line or an error; `token_key` stands in for it."""

    token: str = field(repr=False)
    org_id: int | None = None
    # A stable, non-reversible name for the token (pacing keys, logs, verdicts): hashed once per token, not at each
    # of the several places one call asks for it.
    token_key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # An HTTP header carries printable ASCII only; anything else would fail deep in the HTTP stack, in an
        # exception that quotes the header, token included.
        if not self.token or not self.token.isascii() or not self.token.isprintable() or " " in self.token:
            raise ValueError("an API token must be a non-empty string of printable ASCII without spaces")
        object.__setattr__(self, "token_key", _token_key(self.token))

    @property
    def authorization(self) -> str:
        return f"Bearer {self.token}"
