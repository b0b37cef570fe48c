"""`SandboxServer`: the sandbox on a free loopback port, served by uvicorn in a background thread."""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

import anyio.to_thread
import uvicorn
from starlette.applications import Starlette

from .app import create_app
from .config import Faults, SandboxConfig
from .state import RequestRecord, SandboxState


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind before serving, so the port (a free one when 0) is known before the server starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP (else +40 ms a request).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def uvicorn_config(app: Starlette) -> uvicorn.Config:
    # log_config=None: leave the host process's logging alone.
    return uvicorn.Config(app, log_config=None, log_level="warning", access_log=False, lifespan="off",
                          proxy_headers=False, timeout_graceful_shutdown=1)


class SandboxServer:
    """`with SandboxServer(config) as sb:` (or `async with`) → `sb.url`, `sb.token`, `sb.org_id`, `sb.state`."""

    def __init__(self, config: SandboxConfig | None = None, *, host: str = "127.0.0.1", port: int = 0,
                 startup_timeout: float = 10.0) -> None:
        self.config = config or SandboxConfig()
        self.host = host
        self.port = port
        self.startup_timeout = startup_timeout
        self.app = create_app(self.config)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def state(self) -> SandboxState:
        state: SandboxState = self.app.state.sandbox  # Starlette's state holds anything: the app put this there
        return state

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the sandbox server is not running")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def token(self) -> str:
        return self.config.token

    @property
    def org_id(self) -> int:
        return self.config.org_id

    @property
    def request_log(self) -> list[RequestRecord]:
        return self.state.request_log

    @property
    def faults(self) -> Faults:
        return self.state.faults

    def start(self) -> SandboxServer:
        if self._server is not None:
            raise RuntimeError("the sandbox server is already running")
        sock = bind_socket(self.host, self.port)
        self.port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn_config(self.app))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"sandbox:{self.port}",
                                  daemon=True)
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + self.startup_timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                sock.close()
                raise RuntimeError("the sandbox server did not start")
            time.sleep(0.005)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None or thread is None:
            return
        server.should_exit = True
        thread.join(timeout)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout)

    def __enter__(self) -> SandboxServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    async def __aenter__(self) -> SandboxServer:
        return await anyio.to_thread.run_sync(self.start)

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await anyio.to_thread.run_sync(self.stop)
