"""The test servers' ports: one handed out is kept from every other test's, and is still a server's to bind."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from ports import free_port, listens


def test_a_port_handed_out_is_not_handed_out_again_yet_a_server_can_bind_it() -> None:
    handed = {free_port() for _ in range(50)}
    assert len(handed) == 50
    for _ in range(2000):  # what the other worker's `bind(("127.0.0.1", 0))` may be given meanwhile
        with socket.socket() as other:
            other.bind(("127.0.0.1", 0))
            assert other.getsockname()[1] not in handed
    with socket.socket() as server:  # as uvicorn, redis-server, HAProxy and Prometheus bind
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", handed.pop()))
        server.listen()


def test_the_listener_of_a_port_is_told_apart_from_another_process() -> None:
    told = Path("/proc/net/tcp").exists() or None  # None: a system without /proc cannot tell
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert listens(os.getpid(), port) is (told and True)
        assert listens(os.getppid(), port) is (told and False)
        assert listens(os.getpid(), free_port()) is (told and False)
