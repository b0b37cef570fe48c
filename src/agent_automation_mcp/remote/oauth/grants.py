"""Grants: what one sign-in gave one client, the codes that start them and the tokens that stand for them.

A code is a random string with a prefix; only its SHA-256 is stored, with the pending grant, for a minute, and it
is spent once. The tokens carry their grant, sealed (`tokens.py`): an access token lives an hour; a refresh token
is spent by its use, for the next pair, and a spent one presented again ends its whole grant (someone else holds a
copy), as a code presented again does. The store keeps of a grant only what a sealed token cannot say: that the
grant ended (`ended:<id>`, read at every use of either token, so a revocation holds at once on every replica) and
how far its chain of refreshes has gone (`chain:<id>`).

While the store does not answer, a sign-in goes on: its access token serves and its refresh token refreshes,
unchecked against an end only the store knows; after the store came back empty, a refresh token starts its chain
again. Codes, consent pages and revocation need the store (503 without it). Tokens of the previous scheme are read
from the store (`legacy.py`).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Final

from mcp.server.auth.provider import AuthorizationCode, RefreshToken, TokenError
from mcp.shared.auth import OAuthToken
from pydantic import Field

from .legacy import LegacyGrants
from .sealing import Sealer
from .store import Store, StoreUnavailable
from .tokens import (
    ACCESS_PREFIX,
    ACCESS_SECONDS,
    REFRESH_PREFIX,
    REFRESH_SECONDS,
    Grant,
    TokenSeal,
    client_digest,
)

CODE_PREFIX: Final = "aamcp_code_"
CODE_SECONDS: Final = 60
SPENT_CODE_SECONDS: Final = 600  # a code presented again within this time ends its grant
# An end outlives every token of its grant: a refresh token lives REFRESH_SECONDS from its last refresh, and one
# refreshed while the store was away (unchecked) may be younger than the end; twice covers an outage of a month.
ENDED_SECONDS: Final = 2 * REFRESH_SECONDS


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def is_ours(token: str) -> bool:
    return token.startswith(ACCESS_PREFIX)


class PendingCode(AuthorizationCode):
    """An issued code, as the SDK's token handler checks it, plus what the grant will hold."""

    sealed_token: str = Field(repr=False)
    org_id: int | None = None


class GrantRefresh(RefreshToken):
    """A refresh token opened, as the SDK's token handler checks it: its grant and its step in the grant's chain."""

    grant: Grant
    step: int
    legacy: bool = False  # a token of the previous scheme (`legacy.py`): spent in the store, not by its chain


@dataclass(frozen=True, slots=True)
class SignedIn:
    """What an access token stands for: the grant, and the service token to call with."""

    grant: Grant
    service_token: str = field(repr=False)


class Grants:
    def __init__(self, store: Store, sealer: Sealer, tokens: TokenSeal) -> None:
        self.store = store
        self.sealer = sealer
        self.tokens = tokens
        self.resource = tokens.resource
        self.legacy = LegacyGrants(store, tokens.resource)

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
        grant = Grant(id=secrets.token_urlsafe(16), client=client_digest(code.client_id), org_id=code.org_id,
                      scopes=code.scopes, sealed_token=code.sealed_token)
        await self.store.put(f"code-spent:{digest(code.code)}", grant.id, SPENT_CODE_SECONDS)
        return self._tokens(grant, step=0)

    async def is_live(self, secret: str) -> bool:
        """Whether `secret` is a code or refresh token not yet spent nor expired (looked at, not spent)."""
        if secret.startswith(CODE_PREFIX):
            return await self.store.get(f"code:{digest(secret)}") is not None
        opened = self.tokens.open(REFRESH_PREFIX, secret, time.time())
        if opened is not None:
            try:
                if await self.store.get(f"ended:{opened.grant.id}") is not None:
                    return False
                chain = await self.store.get(f"chain:{opened.grant.id}")
            except StoreUnavailable:
                return True  # its seal is all there is to go on (and budgets are this replica's meanwhile)
            return chain is None or int(chain) <= opened.step
        return self.legacy.shaped(secret, REFRESH_PREFIX) and await self.legacy.refresh(secret) is not None

    async def refresh_token(self, client_id: str, token: str) -> GrantRefresh | None:
        """The refresh token `client_id` presents, opened; None when it is not a live one of this client's."""
        opened = self.tokens.open(REFRESH_PREFIX, token, time.time())
        if opened is not None:
            refresh = GrantRefresh(token=token, client_id=client_id, scopes=opened.grant.scopes,
                                   expires_at=opened.expires, resource=self.resource, grant=opened.grant,
                                   step=opened.step)
        elif self.legacy.shaped(token, REFRESH_PREFIX):
            grant = await self.legacy.refresh(token)
            if grant is None:
                await self._end(await self.legacy.spent_grant(token))
                return None
            refresh = GrantRefresh(token=token, client_id=client_id, scopes=grant.scopes, resource=self.resource,
                                   grant=grant, step=0, legacy=True)
        else:
            return None
        return refresh if refresh.grant.client == client_digest(client_id) else None

    async def rotate(self, refresh: GrantRefresh) -> OAuthToken:
        """Spend the refresh token and issue the next pair; a token spent already ends the grant."""
        grant = refresh.grant
        if refresh.legacy:
            outcome = "ok" if await self.legacy.take(refresh.token, grant.id) else "reused"
            if outcome == "reused":
                await self.end(grant.id)
        else:
            outcome = await self._advance(grant.id, refresh.step)  # a reuse ends the grant there and then
        if outcome == "reused":
            raise TokenError("invalid_grant", "refresh token already used; the sign-in has ended")
        resealed = self.sealer.reseal(grant.sealed_token)  # under the first key: a rotated key is left within 30 days
        if outcome != "ok" or resealed is None:
            raise TokenError("invalid_grant", "the sign-in has ended")
        return self._tokens(replace(grant, sealed_token=resealed), refresh.step + 1)

    async def signed_in(self, access_token: str) -> SignedIn | None:
        """The grant behind an access token of ours and its service token; None when unknown, expired or ended.
        `StoreUnavailable` only for a token of the previous scheme, which the store alone knows."""
        opened = self.tokens.open(ACCESS_PREFIX, access_token, time.time())
        if opened is not None:
            grant: Grant | None = None if await self._ended(opened.grant.id) else opened.grant
        elif self.legacy.shaped(access_token, ACCESS_PREFIX):
            grant = await self.legacy.access(access_token)
        else:
            grant = None
        service_token = self.sealer.open(grant.sealed_token) if grant is not None else None
        return None if grant is None or service_token is None else SignedIn(grant, service_token)

    async def revoke(self, token: str) -> None:
        """End the grant of an access or refresh token (RFC 7009: an unknown token is not an error)."""
        now = time.time()
        opened = self.tokens.open(ACCESS_PREFIX, token, now) or self.tokens.open(REFRESH_PREFIX, token, now)
        if opened is not None:
            await self.end(opened.grant.id)
        elif self.legacy.shaped(token, ACCESS_PREFIX) or self.legacy.shaped(token, REFRESH_PREFIX):
            await self._end(await self.legacy.grant_of(token))

    async def end(self, grant_id: str) -> None:
        await self.store.put(f"ended:{grant_id}", "1", ENDED_SECONDS)
        await self.legacy.end(grant_id)

    async def _end(self, grant_id: str | None) -> None:
        if grant_id is not None:
            await self.end(grant_id)

    async def _end_if_spent(self, spent_key: str) -> None:
        await self._end(await self.store.get(spent_key))

    async def _ended(self, grant_id: str) -> bool:
        try:
            return await self.store.get(f"ended:{grant_id}") is not None
        except StoreUnavailable:
            return False  # served on its seal while the store is away (docs/oauth.md)

    async def _advance(self, grant_id: str, step: int) -> str:
        try:
            return await self.store.advance(f"ended:{grant_id}", f"chain:{grant_id}", step, REFRESH_SECONDS,
                                            ENDED_SECONDS)
        except StoreUnavailable:
            return "ok"  # refreshed on its seal while the store is away: the chain resumes from its next step

    def _tokens(self, grant: Grant, step: int) -> OAuthToken:
        now = int(time.time())
        access = self.tokens.seal(ACCESS_PREFIX, grant, now + ACCESS_SECONDS)
        refresh = self.tokens.seal(REFRESH_PREFIX, grant, now + REFRESH_SECONDS, step)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=ACCESS_SECONDS,
                          refresh_token=refresh, scope=" ".join(grant.scopes) or None)
