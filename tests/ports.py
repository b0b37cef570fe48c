"""Loopback ports for the servers the tests start, and whether a given process is the one listening on one."""

from __future__ import annotations

import os
import socket


def free_port() -> int:
    """A loopback port that stays out of every other `bind` to port 0 for a minute, yet free to a server binding it
    with SO_REUSEADDR (uvicorn, redis-server, HAProxy, Prometheus all do): its accepted end is closed first, so it
    waits in TIME_WAIT. A port merely found free and released could be handed to another test meanwhile (the other
    worker's), and a fleet that starts its replicas one by one on ports chosen up front takes seconds to bind them."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port: int = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):
            accepted, _ = listener.accept()
            accepted.close()
    return port


def listens(pid: int, port: int) -> bool | None:
    """Whether process `pid` holds a socket listening on TCP `port`; None where /proc cannot tell (not Linux)."""
    inodes = set()
    try:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(table) as rows:
                for row in list(rows)[1:]:
                    fields = row.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                        inodes.add(f"socket:[{fields[9]}]")
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
        except OSError:  # closed meanwhile
            continue
    return False
