"""A replica's one Redis client (one connection pool), and the one rule its connections follow.

Pacing, the shared token caches and the sign-in store all use it, and so does the relay of task status reads, with
one connection it holds for the server's life (tasks/notify.py: listen streams hold none); what each does when
Redis does not answer is its own and stays where it is used: pacing goes on at the replica's local share
(pacing/redis_ledger.py), the caches remember in memory (caching.py), sign-ins go on on their sealed tokens while
new sign-ins answer 503 and ends hold on the replica that made them (remote/oauth/ends.py), the relay tries again
after a pause.

The rule: a command may take `REDIS_TIMEOUT` (a loaded replica's event loop lags; that lag must not count as Redis
gone); a broken connection is tried once more on a fresh one, and a connection idle for `HEALTH_CHECK_SECONDS` is
pinged before use, so one left from before a Redis restart never fails a request; a timeout is not repeated (the
command may have run, and a stalled Redis is not waited for twice). Past `REDIS_CONNECTIONS` commands at once,
callers wait up to `REDIS_POOL_WAIT` for a connection instead of failing.
"""

from __future__ import annotations

from typing import Final

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as BrokenConnection
from redis.exceptions import RedisError

REDIS_TIMEOUT: Final = 1.0  # seconds a command or a connect may take
REDIS_CONNECTIONS: Final = 32  # per replica
REDIS_POOL_WAIT: Final = 5.0  # seconds to wait for a free connection: longer than a busy event loop's lag
HEALTH_CHECK_SECONDS: Final = 5  # a connection idle this long is pinged before it carries a command
UNREACHABLE: Final = (RedisError, OSError, TimeoutError)  # what the client raises when Redis cannot answer


def redis_client(url: str) -> Redis:
    """A client over a new pool for `url`: build it once per replica and hand it to every user (bytes answers)."""
    pool = BlockingConnectionPool.from_url(
        url, max_connections=REDIS_CONNECTIONS, timeout=REDIS_POOL_WAIT, socket_timeout=REDIS_TIMEOUT,
        socket_connect_timeout=REDIS_TIMEOUT, health_check_interval=HEALTH_CHECK_SECONDS,
        retry=Retry(NoBackoff(), 1, supported_errors=(BrokenConnection,)))
    return Redis.from_pool(pool)
