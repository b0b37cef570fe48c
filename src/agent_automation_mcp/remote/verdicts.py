"""Whether the service accepts a token, asked once with a cheap call and remembered by the token's hash.

So a request with a refused token gets HTTP 401 before any tool runs, and a token costs the service one
`GET /v1/users/me` per few minutes, not one per request. Remembered for a bounded time and count; a
question the service could not answer (down, slow, rate-limited) is not remembered, and the request goes
on: the tool's own call then meets the same answer and reports it in the one error shape.
"""

from __future__ import annotations

import logging
from typing import Final

import anyio

from ..api.client import AgentAutomationClient
from ..api.credentials import Credentials
from ..api.errors import ApiError, AuthenticationError
from ..api.transport import ApiTransport
from ..caching import ExpiringCache
from ..logs import tenant_id

logger = logging.getLogger(__name__)

ACCEPTED_SECONDS: Final = 300.0
REFUSED_SECONDS: Final = 60.0  # shorter: a token just created should start working soon
MAX_TOKENS: Final = 10_000
CHECK_SECONDS: Final = 10.0


class TokenVerdicts:
    def __init__(self, max_entries: int = MAX_TOKENS) -> None:
        self._verdicts: ExpiringCache[bool] = ExpiringCache(max_entries)
        self._asking: dict[str, anyio.Event] = {}  # one question per token at a time, however many requests wait

    async def accepted(self, transport: ApiTransport, token: str) -> bool:
        credentials = Credentials(token)
        key = credentials.token_key
        verdict = self._verdicts.get(key)
        if verdict is not None:
            return verdict
        asking = self._asking.get(key)
        if asking is not None:  # another request is asking already: take its answer
            await asking.wait()
            verdict = self._verdicts.get(key)
            return True if verdict is None else verdict  # no answer came: let the request through
        done = self._asking[key] = anyio.Event()
        try:
            return await self._ask(transport, credentials)
        finally:
            transport.observer and transport.observer.token_checked(self._verdicts.get(key))
            del self._asking[key]
            done.set()

    async def _ask(self, transport: ApiTransport, credentials: Credentials) -> bool:
        client = AgentAutomationClient(transport, credentials).within(CHECK_SECONDS)
        try:
            await client.get_current_user()
        except AuthenticationError:
            self._verdicts.put(credentials.token_key, False, REFUSED_SECONDS)
            logger.info("the service refused token %s", tenant_id(credentials.token_key))
            return False
        except ApiError as exc:
            logger.info("could not check token %s (%s); letting the request through", tenant_id(credentials.token_key),
                        exc.kind)
            return True
        self._verdicts.put(credentials.token_key, True, ACCEPTED_SECONDS)
        return True
