"""A private redis-server on a free loopback port, without persistence unless asked."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Final, TypeVar

import pytest

from ports import free_port

T = TypeVar("T")


NO_PERSISTENCE: Final = ("--save", "", "--appendonly", "no")


class RedisServer:
    """One redis-server process, without persistence unless `options` give it; stop and start it again on the same
    port (started again without persistence, it is empty)."""

    def __init__(self, binary: str, options: Sequence[str] = NO_PERSISTENCE) -> None:
        self.binary = binary
        self.options = list(options)
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", *self.options],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def flush(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
            sock.sendall(b"FLUSHALL\r\n")
            if not sock.recv(16).startswith(b"+OK"):
                raise RuntimeError("FLUSHALL failed")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None

    def kill(self) -> None:
        """Gone at once, as an operator's `kill -9` or an out-of-memory kill leaves it (started again, it is empty)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


@contextmanager
def running_redis() -> Iterator[RedisServer]:
    """A started redis-server for a test or fixture, stopped after it; the test is skipped where there is none."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    server = RedisServer(binary)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def started_on_redis(start: Callable[[RedisServer], T], stop: Callable[[T], object]) -> Iterator[T]:
    """Something started on a fresh redis-server (replicas, a fleet), stopped before the server is."""
    with running_redis() as redis:
        started = start(redis)
        try:
            yield started
        finally:
            stop(started)

