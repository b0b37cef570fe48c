"""What a sign-in grants: every tool the server offers, or reading only.

A person connecting a chat app may tick "read only" on the consent page (or the app may ask for the scope):
the grant then carries the `read-only` scope; its requests are narrowed as by `X-MCP-Readonly: true` (no tool
that writes or deletes is listed), and a call of such a tool past the list is refused `insufficient_scope`
before it runs. This is how a legacy-era (2025-11-25) HTTP client, which a stateless server cannot ask to
confirm a destructive call, is connected without the power to do one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

READ_ONLY: Final = "read-only"


def with_read_only(scopes: Sequence[str]) -> list[str]:
    return [*scopes, READ_ONLY] if READ_ONLY not in scopes else list(scopes)


def is_read_only(scopes: Sequence[str]) -> bool:
    return READ_ONLY in scopes
