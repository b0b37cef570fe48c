"""A budget of token checks for tokens the server has never seen accepted, per client address and in total.

A token nobody has seen costs the service one check (`GET /v1/users/me`), made with that token from this
server's address: without a bound, anyone could turn random tokens into requests to the service, which may
then throttle the company's address for everyone. So such checks are counted in a sliding minute, per client
address and for the whole deployment, shared by every replica through Redis (each replica's memory without
it, or while it is unreachable); past either count a request gets HTTP 429 with `Retry-After`. Tokens the
service accepted before, and verdicts still remembered, spend nothing.
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from typing import Final

from ..caching import KEY_PREFIX, SharedStore
from ..config import DEFAULT_TOKEN_CHECKS_PER_ADDRESS, DEFAULT_TOKEN_CHECKS_TOTAL

WINDOW_SECONDS: Final = 60.0
TOTAL: Final = "total"

# KEYS: the address's log, the total's log. ARGV: window µs, per-address limit, total limit.
# Each log is a list of check instants (Redis' clock, µs), newest first, at most its limit long: a check is
# allowed when the log is short of its limit or its oldest entry has left the window. Answers 0 when the check
# is counted, or the µs until it would be allowed.
_SPEND: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[1])
local wait = 0
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[i + 1])
  if redis.call('LLEN', key) >= limit then
    local oldest = tonumber(redis.call('LINDEX', key, limit - 1))
    wait = math.max(wait, oldest + window - now)
  end
end
if wait > 0 then return wait end
for i, key in ipairs(KEYS) do
  redis.call('LPUSH', key, now)
  redis.call('LTRIM', key, 0, tonumber(ARGV[i + 1]) - 1)
  redis.call('PEXPIRE', key, math.ceil(window / 1000))
end
return 0
"""


class OverBudget(Exception):
    """Unknown tokens from this address (or from everyone) have used the checks of the last minute."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"over the budget of token checks; retry after {retry_after:.0f} s")
        self.retry_after = retry_after


class StrangerBudget:
    """Checks left in the last `window` seconds, per client address and in total: in Redis, or in memory."""

    def __init__(self, store: SharedStore, per_address: int = DEFAULT_TOKEN_CHECKS_PER_ADDRESS,
                 total: int = DEFAULT_TOKEN_CHECKS_TOTAL, window: float = WINDOW_SECONDS) -> None:
        if per_address < 1 or total < 1:
            raise ValueError("the budgets of token checks must be >= 1 per minute")
        self.store = store
        self.per_address = per_address
        self.total = total
        self.window = window
        self._script = store.redis.register_script(_SPEND) if store.redis is not None else None
        self._logs: dict[str, deque[float]] = {}  # memory: address hash (or "total") -> instants, newest last

    async def spend(self, address: str | None) -> None:
        """Count one check for `address` (None: unknown, counted as one address); `OverBudget` if none is left."""
        name = hashlib.sha256((address or "-").encode()).hexdigest()[:24]  # no address is stored as it is
        redis = self.store.reachable()
        if redis is not None and self._script is not None:
            keys = [f"{KEY_PREFIX}:{{strangers}}:address:{name}", f"{KEY_PREFIX}:{{strangers}}:{TOTAL}"]
            try:
                wait = await self._script(keys=keys, args=[round(self.window * 1_000_000), self.per_address,
                                                           self.total], client=redis)
            except self.store.failures as exc:
                self.store.lost(exc)
            else:
                if wait > 0:
                    raise OverBudget(wait / 1_000_000)
                return
        self._spend_locally(name)

    def _spend_locally(self, name: str) -> None:
        """As the script does, in this process: the logs hold instants, oldest first, at most their limit."""
        now = time.monotonic()
        limits = {name: self.per_address, TOTAL: self.total}
        wait = max((log[0] + self.window - now for key, limit in limits.items()
                    if len(log := self._logs.get(key, ())) >= limit), default=0.0)
        if wait > 0:
            raise OverBudget(wait)
        for key, limit in limits.items():
            log = self._logs.setdefault(key, deque(maxlen=limit))
            log.append(now)
        if len(self._logs) > 2 * self.total:  # only `total` addresses can have a check in the window
            for key in [key for key, log in self._logs.items() if log[-1] + self.window <= now]:
                del self._logs[key]
