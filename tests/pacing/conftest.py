"""A private redis-server on a free loopback port, for the tests of the shared ledger."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from .redis_server import RedisServer


@pytest.fixture(scope="session")
def redis_binary() -> str:
    binary = shutil.which("redis-server")
    if binary is None:
        reason = "redis-server is not installed (Debian: apt-get install redis-server); the shared-ledger tests need it"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return binary


@pytest.fixture(scope="session")
def redis_server(redis_binary: str) -> Iterator[RedisServer]:
    server = RedisServer(redis_binary)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_redis_server(redis_binary: str) -> Iterator[RedisServer]:
    """A server of the test's own, which it may stop and restart."""
    server = RedisServer(redis_binary)
    server.start()
    yield server
    server.stop()
