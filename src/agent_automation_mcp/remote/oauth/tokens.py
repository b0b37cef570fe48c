"""The access and refresh tokens this server issues: each carries its grant, sealed (`state_seal.py`), so any replica
holding the keys honours it with nothing stored, and a sign-in outlives Redis coming back empty.

A grant is what one sign-in gave one client: its id, a digest of the client's id, the organisation, the scopes
and the service token, itself encrypted with the operator's sign-in keys (`sealing.py`): reading it takes both
key sets. Access and refresh tokens are sealed under keys of their own purpose and bound to this deployment's
resource, so neither opens as the other, nor at another deployment, nor once altered. Each says when it expires
(this replica's clock judges, with `CLOCK_LEEWAY` to spare for replicas whose clocks disagree: an hour for an
access token, 30 days for a refresh token); a refresh token also says its place in its grant's chain of refreshes
(`Grants.rotate` keeps the chain in Redis).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from ...state_seal import StateSeal

ACCESS_PREFIX: Final = "aamcp_at_"
REFRESH_PREFIX: Final = "aamcp_rt_"
ACCESS_SECONDS: Final = 3600
REFRESH_SECONDS: Final = 30 * 86400  # a sign-in unused for this long ends
# A token is honoured this long past its expiry: replicas' clocks differ by seconds, and one a little behind or ahead
# must not refuse what another issued (`agent_automation_clock_offset_seconds` shows a replica further off).
CLOCK_LEEWAY: Final = 60
MAX_TOKEN_CHARS: Final = 4096  # longer is not ours: refused before any decoding
ACCESS: Final = b"agent-automation-mcp oauth access token v1"
REFRESH: Final = b"agent-automation-mcp oauth refresh token v1"


def client_digest(client_id: str) -> str:
    """What a token says of its client: enough to tell it from any other, far shorter than a sealed client id."""
    return hashlib.sha256(client_id.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Grant:
    id: str
    client: str  # client_digest of the client's id
    org_id: int | None
    scopes: list[str]
    sealed_token: str = field(repr=False)  # the service token, encrypted with the sign-in keys


@dataclass(frozen=True, slots=True)
class Opened:
    """A token of ours, opened: its grant, when it expires (Unix seconds) and, for a refresh token, its place."""

    grant: Grant
    expires: int
    step: int = 0


class TokenSeal:
    def __init__(self, keys: Sequence[str], resource: str) -> None:
        self._seals = {ACCESS_PREFIX: StateSeal(keys, ACCESS), REFRESH_PREFIX: StateSeal(keys, REFRESH)}
        self.resource = resource

    def seal(self, prefix: str, grant: Grant, expires: int, step: int = 0) -> str:
        payload = json.dumps([grant.id, grant.client, grant.org_id, grant.scopes, grant.sealed_token, expires, step],
                             separators=(",", ":")).encode()
        return prefix + self._seals[prefix].seal(payload, self.resource)

    def open(self, prefix: str, token: str, now: float) -> Opened | None:
        """The token's grant; None when it is not a live token of this kind that this deployment issued."""
        if not token.startswith(prefix) or len(token) > MAX_TOKEN_CHARS:
            return None
        payload = self._seals[prefix].open(token.removeprefix(prefix), self.resource)
        if payload is None:
            return None
        grant_id, client, org_id, scopes, sealed_token, expires, step = json.loads(payload)
        if expires + CLOCK_LEEWAY <= now:
            return None
        return Opened(Grant(grant_id, client, org_id, scopes, sealed_token), expires, step)
