"""Grants: what one sign-in gave one client, the codes that start them and the tokens that stand for them.

A code is a random string with a prefix; only its SHA-256 is stored, with the pending grant, for a minute, and it
is spent once. The tokens carry their grant, sealed (`tokens.py`): an access token lives an hour; a refresh token
is spent by its use, for the next pair, and a spent one presented again ends its whole grant (someone else holds a
copy), as a code presented again does; presented again within `RETRY_SECONDS` (an answer lost, two requests at
once), it gets the same pair, sealed in the store for that refresh token alone. The store keeps of a grant only what
a sealed token cannot say: that the grant ended (`ended:<id>`, read at every use of either token, so a revocation
holds at once on every replica) and how far its chain of refreshes has gone (`chain:<id>`); every replica keeps
these too (`ends.py`), so they outlive the store losing its data. The operator's ends (`cutoffs.py`) need no store.

While the store does not answer, a sign-in goes on: its access token serves and its refresh token refreshes,
checked against what this replica knows. Codes and consent pages need the store (503 without it); a revocation
holds on this replica at once and everywhere once the store answers. Tokens of the previous scheme are read from the
store (`legacy.py`).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Final

from mcp.server.auth.provider import AuthorizationCode, RefreshToken, TokenError
from mcp.shared.auth import OAuthToken
from pydantic import AnyUrl, Field

from ...state_seal import StateSeal
from .cutoffs import Cutoffs
from .ends import Ends
from .legacy import LegacyGrants
from .sealing import GrantSecret, Sealer
from .store import Store, StoreUnavailable, chain_key, retry_key
from .tokens import (
    ACCESS_PREFIX,
    ACCESS_SECONDS,
    CLOCK_LEEWAY,
    REFRESH_PREFIX,
    REFRESH_SECONDS,
    Grant,
    TokenSeal,
    client_digest,
)

CODE_PREFIX: Final = "aamcp_code_"
CODE_SECONDS: Final = 60
SPENT_CODE_SECONDS: Final = 600  # a code presented again within this time ends its grant
RETRY: Final = b"agent-automation-mcp oauth refresh retry v1"  # seals a refresh's pair under its refresh token


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def is_ours(token: str) -> bool:
    return token.startswith(ACCESS_PREFIX)


class PendingCode(AuthorizationCode):
    """An issued code, as the SDK's token handler checks it, plus what the grant will hold."""

    sealed_token: str = Field(repr=False)
    org_id: int | None = None
    user: int | None = None  # the service's id of the person who signed in


class GrantRefresh(RefreshToken):
    """A refresh token opened, as the SDK's token handler checks it: its grant and its step in the grant's chain."""

    grant: Grant
    step: int
    legacy: bool = False  # a token of the previous scheme (`legacy.py`): spent in the store, not by its chain


@dataclass(frozen=True, slots=True)
class SignedIn:
    """What an access token stands for: the grant, and the service token to call with."""

    grant: Grant
    secret: GrantSecret = field(repr=False)

    @property
    def service_token(self) -> str:
        return self.secret.token


class Grants:
    def __init__(self, store: Store, sealer: Sealer, tokens: TokenSeal, cutoffs: Cutoffs | None = None) -> None:
        self.store = store
        self.sealer = sealer
        self.tokens = tokens
        self.resource = tokens.resource
        self.legacy = LegacyGrants(store, tokens.resource)
        self.ends = Ends(store)
        self.cutoffs = cutoffs or Cutoffs()

    async def issue_code(self, *, client_id: str, redirect_uri: str, code_challenge: str, scopes: list[str],
                         service_token: str, org_id: int | None, user: int | None = None) -> str:
        code = CODE_PREFIX + secrets.token_urlsafe(32)
        pending = PendingCode(code="", scopes=scopes, expires_at=time.time() + CODE_SECONDS, client_id=client_id,
                              code_challenge=code_challenge, redirect_uri=AnyUrl(redirect_uri),
                              redirect_uri_provided_explicitly=True, resource=self.resource,
                              sealed_token=self.sealer.seal(service_token), org_id=org_id, user=user)
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
        grant_id = secrets.token_urlsafe(16)
        secret = GrantSecret(self.sealer.open(code.sealed_token) or "", grant_id, int(time.time()), code.user)
        if not secret.token:
            raise TokenError("invalid_grant", "the sign-in keys changed since the code was issued; sign in again")
        grant = Grant(id=grant_id, client=client_digest(code.client_id), org_id=code.org_id, scopes=code.scopes,
                      sealed_token=self.sealer.seal_grant(secret))
        await self.store.put(f"code-spent:{digest(code.code)}", grant.id, SPENT_CODE_SECONDS)
        return self._tokens(grant, step=0)

    async def is_live(self, secret: str) -> bool:
        """Whether `secret` is a code or refresh token not yet spent nor expired (looked at, not spent)."""
        if secret.startswith(CODE_PREFIX):
            return await self.store.get(f"code:{digest(secret)}") is not None
        opened = self.tokens.open(REFRESH_PREFIX, secret, time.time())
        if opened is not None:
            if await self.ends.ended(opened.grant.id):
                return False
            try:
                chain = await self.store.get(chain_key(opened.grant.id))
                if chain is None or int(chain) <= opened.step:
                    return True
                # spent within RETRY_SECONDS: its retry gets the same pair
                return int(chain) == opened.step + 1 and await self.store.get(
                    retry_key(opened.grant.id, opened.step)) is not None
            except StoreUnavailable:
                return True  # its seal is all there is to go on (and budgets are this replica's meanwhile)
        return self.legacy.shaped(secret, REFRESH_PREFIX) and await self.legacy.refresh(secret) is not None

    async def refresh_token(self, client_id: str, token: str) -> GrantRefresh | None:
        """The refresh token `client_id` presents, opened; None when it is not a live one of this client's."""
        opened = self.tokens.open(REFRESH_PREFIX, token, time.time())
        if opened is not None:
            refresh = GrantRefresh(token=token, client_id=client_id, scopes=opened.grant.scopes,
                                   expires_at=opened.expires + CLOCK_LEEWAY, resource=self.resource, grant=opened.grant,
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
        """Spend the refresh token and issue the next pair; a token spent already ends the grant, unless it was spent
        within `RETRY_SECONDS`: then the pair it got then."""
        grant = refresh.grant
        secret = self.sealer.open_grant(grant.sealed_token, grant.id)
        if secret is None or self.cutoffs.ended(secret):
            raise TokenError("invalid_grant", "the sign-in has ended")
        # Sealed again under the first key (a rotated key is left within 30 days), bound to the grant.
        pair = self._tokens(replace(grant, sealed_token=self.sealer.seal_grant(replace(secret, grant=grant.id))),
                            refresh.step + 1)
        if refresh.legacy:
            outcome = "ok" if await self.legacy.take(refresh.token, grant.id) else "reused"
            if outcome == "reused":
                await self._end(grant.id)
        else:  # a reuse ends the grant there and then
            retry = StateSeal([refresh.token], RETRY)
            outcome, issued = await self.ends.advance(grant.id, refresh.step,
                                                      retry.seal(pair.model_dump_json().encode(), grant.id))
            opened = retry.open(issued, grant.id) if outcome == "retry" and issued is not None else None
            if opened is not None:
                return OAuthToken.model_validate_json(opened)
        if outcome == "reused":
            raise TokenError("invalid_grant", "refresh token already used; the sign-in has ended")
        if outcome != "ok":
            raise TokenError("invalid_grant", "the sign-in has ended")
        return pair

    async def signed_in(self, access_token: str) -> SignedIn | None:
        """The grant behind an access token of ours and its service token; None when unknown, expired or ended.
        `StoreUnavailable` only for a token of the previous scheme, which the store alone knows."""
        opened = self.tokens.open(ACCESS_PREFIX, access_token, time.time())
        if opened is not None:
            grant: Grant | None = None if await self.ends.ended(opened.grant.id) else opened.grant
        elif self.legacy.shaped(access_token, ACCESS_PREFIX):
            grant = await self.legacy.access(access_token)
        else:
            grant = None
        secret = self.sealer.open_grant(grant.sealed_token, grant.id) if grant is not None else None
        if grant is None or secret is None or self.cutoffs.ended(secret):
            return None
        return SignedIn(grant, secret)

    async def revoke(self, token: str) -> None:
        """End the grant of an access or refresh token (RFC 7009: an unknown token is not an error); `StoreUnavailable`
        when the store did not take the end (it holds on this replica, and everywhere once the store answers)."""
        now = time.time()
        opened = self.tokens.open(ACCESS_PREFIX, token, now) or self.tokens.open(REFRESH_PREFIX, token, now)
        if opened is not None:
            await self.end(opened.grant.id)
        elif self.legacy.shaped(token, ACCESS_PREFIX) or self.legacy.shaped(token, REFRESH_PREFIX):
            await self._end(await self.legacy.grant_of(token))

    async def end(self, grant_id: str) -> None:
        await self.ends.end(grant_id)
        await self.legacy.end(grant_id)

    async def _end(self, grant_id: str | None) -> None:
        if grant_id is not None:
            await self.end(grant_id)

    async def _end_if_spent(self, spent_key: str) -> None:
        await self._end(await self.store.get(spent_key))

    def _tokens(self, grant: Grant, step: int) -> OAuthToken:
        now = int(time.time())
        access = self.tokens.seal(ACCESS_PREFIX, grant, now + ACCESS_SECONDS)
        refresh = self.tokens.seal(REFRESH_PREFIX, grant, now + REFRESH_SECONDS, step)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=ACCESS_SECONDS,
                          refresh_token=refresh, scope=" ".join(grant.scopes) or None)
