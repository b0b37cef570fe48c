"""Sign-ins and registrations made before tokens and client ids were sealed, read from the store until they end.

Before, an access or refresh token was a random string whose SHA-256 the store held (`at:`, `rt:`, and `rt-spent:`
once spent), pointing at the grant's record (`grant:<id>`), and a registered client's id was a UUID naming its
record (`client:<id>`). An upgraded replica honours such an access token for the rest of its hour, and takes such a
refresh token once, for sealed tokens of the same grant: the sign-in goes on sealed, its person never asked again
(docs/rollouts.md). A client keeps its id, so a registration of before stays in the store, kept while it is used.
"""

from __future__ import annotations

import hashlib
import json
from typing import Final

from mcp.shared.auth import OAuthClientInformationFull

from .store import Store
from .tokens import REFRESH_SECONDS, Grant, client_digest

TOKEN_BODY_CHARS: Final = 43  # secrets.token_urlsafe(32), after the prefix
MAX_CLIENT_ID_CHARS: Final = 100  # a UUID, with room
CLIENT_SECONDS: Final = 90 * 86400  # a registration is kept this long after its last use


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class LegacyGrants:
    def __init__(self, store: Store, resource: str) -> None:
        self.store = store
        self.resource = resource

    @staticmethod
    def shaped(token: str, prefix: str) -> bool:
        """Whether `token` has the shape the previous scheme gave tokens of this kind (only then is the store asked)."""
        return token.startswith(prefix) and len(token) == len(prefix) + TOKEN_BODY_CHARS

    async def access(self, token: str) -> Grant | None:
        return self._grant(await self.store.follow(f"at:{_digest(token)}", "grant:"))

    async def refresh(self, token: str) -> Grant | None:
        """The grant of a refresh token not spent yet; a spent one ends its grant (`end_if_spent`'s answer)."""
        grant_id = await self.store.get(f"rt:{_digest(token)}")
        if grant_id is None:
            return None
        return self._grant(await self.store.get(f"grant:{grant_id}"))

    async def spent_grant(self, token: str) -> str | None:
        """The grant of a refresh token spent already, whose use again must end it."""
        return await self.store.get(f"rt-spent:{_digest(token)}")

    async def take(self, token: str, grant_id: str) -> bool:
        """Spend a refresh token, once whichever replica sees it first; the record of its grant goes with it."""
        key = _digest(token)
        if await self.store.take(f"rt:{key}") is None:
            return False
        await self.store.put(f"rt-spent:{key}", grant_id, REFRESH_SECONDS)
        await self.store.delete(f"grant:{grant_id}")
        return True

    async def grant_of(self, token: str) -> str | None:
        """The grant of an access or refresh token of the previous scheme, spent or not (for revocation)."""
        key = _digest(token)
        for kind in ("at", "rt", "rt-spent"):
            grant_id = await self.store.get(f"{kind}:{key}")
            if grant_id is not None:
                return grant_id
        return None

    async def end(self, grant_id: str) -> None:
        await self.store.delete(f"grant:{grant_id}")

    def _grant(self, raw: str | None) -> Grant | None:
        if raw is None:
            return None
        record = json.loads(raw)
        if record["resource"] != self.resource:
            return None
        return Grant(record["id"], client_digest(record["client_id"]), record["org_id"], record["scopes"],
                     record["sealed_token"])


class LegacyClients:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def get(self, client_id: str) -> OAuthClientInformationFull | None:
        if len(client_id) > MAX_CLIENT_ID_CHARS:
            return None
        raw = await self.store.get(f"client:{client_id}")
        return OAuthClientInformationFull.model_validate_json(raw) if raw is not None else None

    async def keep(self, client_id: str) -> None:
        """A sign-in or refresh of this client: keep its record another `CLIENT_SECONDS`."""
        raw = await self.store.get(f"client:{client_id}")
        if raw is not None:
            await self.store.put(f"client:{client_id}", raw, CLIENT_SECONDS)
