"""Grants: what one sign-in gave one client, and the codes and tokens that stand for it.

A grant holds the client, the resource, the organisation chosen and the service token, sealed with the
operator's keys. Codes and tokens are random strings with a prefix (so the gate tells ours from a service
token); only their SHA-256 is stored. An access token lives an hour, a refresh token is spent by its use
(a new one comes with the new access token), and a spent code or refresh token presented again ends its
whole grant: someone else holds a copy. Ending a grant deletes its record, which every token checks on
every use, so it holds at once on every replica that shares the store.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import Final

from mcp.server.auth.provider import AuthorizationCode, RefreshToken, TokenError
from mcp.shared.auth import OAuthToken
from pydantic import Field

from .sealing import Sealer
from .store import Store

ACCESS_PREFIX: Final = "aamcp_at_"
REFRESH_PREFIX: Final = "aamcp_rt_"
CODE_PREFIX: Final = "aamcp_code_"
ACCESS_SECONDS: Final = 3600
REFRESH_SECONDS: Final = 30 * 86400  # a grant unused for this long ends
CODE_SECONDS: Final = 60
SPENT_CODE_SECONDS: Final = 600  # a code presented again within this time ends its grant


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def is_ours(token: str) -> bool:
    return token.startswith(ACCESS_PREFIX)


@dataclass(frozen=True, slots=True)
class Grant:
    id: str
    client_id: str
    resource: str
    sealed_token: str = field(repr=False)
    org_id: int | None
    scopes: list[str]

    def dumps(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def loads(cls, raw: str) -> Grant:
        return cls(**json.loads(raw))


class PendingCode(AuthorizationCode):
    """An issued code, as the SDK's token handler checks it, plus what the grant will hold."""

    sealed_token: str = Field(repr=False)
    org_id: int | None = None


class GrantRefresh(RefreshToken):
    grant_id: str


@dataclass(frozen=True, slots=True)
class SignedIn:
    """What an access token stands for: the grant, and the service token to call with."""

    grant: Grant
    service_token: str = field(repr=False)


class Grants:
    def __init__(self, store: Store, sealer: Sealer, resource: str) -> None:
        self.store = store
        self.sealer = sealer
        self.resource = resource

    async def issue_code(self, *, client_id: str, redirect_uri: str, code_challenge: str, scopes: list[str],
                         service_token: str, org_id: int | None) -> str:
        code = CODE_PREFIX + secrets.token_urlsafe(32)
        pending = PendingCode(code="", scopes=scopes, expires_at=time.time() + CODE_SECONDS, client_id=client_id,
                              code_challenge=code_challenge, redirect_uri=redirect_uri,  # type: ignore[arg-type]
                              redirect_uri_provided_explicitly=True, resource=self.resource,
                              sealed_token=self.sealer.seal(service_token), org_id=org_id)
        await self.store.put(f"code:{digest(code)}", pending.model_dump_json(), CODE_SECONDS)
        return code

    async def pending_code(self, code: str) -> PendingCode | None:
        raw = await self.store.get(f"code:{digest(code)}")
        if raw is None:
            await self._end_if_spent(f"code-spent:{digest(code)}")
            return None
        # The store's expiry (Redis' clock) is the one that counts: a code still stored is live, whatever the clock
        # of the replica that issued it or of this one, so `expires_at` is restated in this replica's clock.
        return PendingCode.model_validate_json(raw).model_copy(update={"code": code,
                                                                      "expires_at": time.time() + CODE_SECONDS})

    async def redeem(self, code: PendingCode) -> OAuthToken:
        """Spend the code (once, whichever replica sees it first) and start its grant."""
        if await self.store.take(f"code:{digest(code.code)}") is None:
            await self._end_if_spent(f"code-spent:{digest(code.code)}")
            raise TokenError("invalid_grant", "authorization code already used")
        grant = Grant(id=secrets.token_urlsafe(16), client_id=code.client_id, resource=code.resource or self.resource,
                      sealed_token=code.sealed_token, org_id=code.org_id, scopes=code.scopes)
        await self.store.put(f"grant:{grant.id}", grant.dumps(), REFRESH_SECONDS)
        await self.store.put(f"code-spent:{digest(code.code)}", grant.id, SPENT_CODE_SECONDS)
        return await self._tokens(grant)

    async def is_live(self, secret: str) -> bool:
        """Whether `secret` is a code or refresh token not yet spent nor expired (looked at, not spent)."""
        kind = "code" if secret.startswith(CODE_PREFIX) else "rt" if secret.startswith(REFRESH_PREFIX) else None
        return kind is not None and await self.store.get(f"{kind}:{digest(secret)}") is not None

    async def refresh_token(self, token: str) -> GrantRefresh | None:
        if not token.startswith(REFRESH_PREFIX):
            return None
        grant_id = await self.store.get(f"rt:{digest(token)}")
        if grant_id is None:
            await self._end_if_spent(f"rt-spent:{digest(token)}")
            return None
        grant = await self._grant(grant_id)
        if grant is None:
            return None
        return GrantRefresh(token=token, client_id=grant.client_id, scopes=grant.scopes, resource=grant.resource,
                            grant_id=grant.id)

    async def rotate(self, refresh: GrantRefresh) -> OAuthToken:
        """Spend the refresh token and issue the next pair; a token spent already ends the grant."""
        key = digest(refresh.token)
        if await self.store.take(f"rt:{key}") is None:
            await self.end(refresh.grant_id)
            raise TokenError("invalid_grant", "refresh token already used; the sign-in has ended")
        await self.store.put(f"rt-spent:{key}", refresh.grant_id, REFRESH_SECONDS)
        grant = await self._grant(refresh.grant_id)
        if grant is None:
            raise TokenError("invalid_grant", "the sign-in has ended")
        await self.store.put(f"grant:{grant.id}", grant.dumps(), REFRESH_SECONDS)
        return await self._tokens(grant)

    async def signed_in(self, access_token: str) -> SignedIn | None:
        """The grant behind an access token of ours and its service token; None when unknown, expired or ended."""
        raw = await self.store.follow(f"at:{digest(access_token)}", "grant:")
        grant = Grant.loads(raw) if raw is not None else None
        if grant is None or grant.resource != self.resource:
            return None
        service_token = self.sealer.open(grant.sealed_token)
        return None if service_token is None else SignedIn(grant, service_token)

    async def revoke(self, token: str) -> None:
        """End the grant of an access or refresh token (RFC 7009: an unknown token is not an error)."""
        key = digest(token)
        for kind in ("at", "rt", "rt-spent"):
            grant_id = await self.store.get(f"{kind}:{key}")
            if grant_id is not None:
                await self.end(grant_id)
                await self.store.delete(f"{kind}:{key}")
                return

    async def end(self, grant_id: str) -> None:
        await self.store.delete(f"grant:{grant_id}")

    async def _end_if_spent(self, spent_key: str) -> None:
        grant_id = await self.store.get(spent_key)
        if grant_id is not None:
            await self.end(grant_id)

    async def _grant(self, grant_id: str) -> Grant | None:
        raw = await self.store.get(f"grant:{grant_id}")
        return Grant.loads(raw) if raw is not None else None

    async def _tokens(self, grant: Grant) -> OAuthToken:
        access = ACCESS_PREFIX + secrets.token_urlsafe(32)
        refresh = REFRESH_PREFIX + secrets.token_urlsafe(32)
        await self.store.put(f"at:{digest(access)}", grant.id, ACCESS_SECONDS)
        await self.store.put(f"rt:{digest(refresh)}", grant.id, REFRESH_SECONDS)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=ACCESS_SECONDS,
                          refresh_token=refresh, scope=" ".join(grant.scopes) or None)
