"""Who a request is served for, where capacity is shared per tenant: the Codegen user behind its token.

One person may hold several API tokens, and with sign-in several grants (one per app), each with its own token;
what is shared fairly (listen streams) is shared per person, so more tokens buy no more of it. The gate learns the
user from its check of the token (`GET /v1/users/me`) and names the tenant here for the rest of the request; where
no gate ran (stdio) or the user is not known, the token itself is the tenant.
"""

from __future__ import annotations

import hashlib
from contextvars import ContextVar

from .api.credentials import Credentials

_user: ContextVar[int | None] = ContextVar("tenant_user", default=None)


def serve_user(user_id: int | None) -> None:
    """The gate: this request is served for Codegen user `user_id` (None: not known)."""
    _user.set(user_id)


def tenant_key(credentials: Credentials) -> str:
    """The tenant's key (a hash, as `Credentials.token_key`, so logs name it by `logs.tenant_id` alike)."""
    user = _user.get()
    if user is None:
        return credentials.token_key
    return hashlib.sha256(f"codegen-user:{user}".encode()).hexdigest()[:24]
