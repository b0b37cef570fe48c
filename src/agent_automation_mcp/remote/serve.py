"""Running the remote app under uvicorn, with a graceful drain on SIGTERM.

On SIGTERM `/readyz` turns 503 at once (the load balancer stops sending), new `/mcp` requests get 503 (which a
balancer may send to another replica: manifests/haproxy), task listen streams end at once (their clients listen
again elsewhere), while the calls in flight finish, for up to the grace period; then the process exits 0. A second
signal, or SIGINT, stops at once as uvicorn does. With a metrics port, a second listener serves `/metrics` there
until the main one has stopped, so the scraper sees the drain.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import signal
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

import anyio
import uvicorn

from ..config import RemoteSettings
from ..server import AgentAutomationServer
from .app import build_app, build_metrics_app
from .forwarded import ForwardedFor
from .gate import Lifecycle
from .hosts import HostPolicy
from .metrics import Metrics

logger = logging.getLogger(__name__)

FINAL_SHUTDOWN_SECONDS = 1  # after the drain, for uvicorn to close what is left (whole seconds, as uvicorn takes it)
# A drain lasts at least this long, even with nothing in flight: until the shipped HAProxy's health checks (fall 2
# at fastinter 500 ms) have taken the replica out, a request may already be on its way to it, and exiting then
# would drop it unanswered instead of answering 503 for the balancer to send elsewhere.
MIN_DRAIN_SECONDS = 2.0


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, lifecycle: Lifecycle, grace: float) -> None:
        super().__init__(config)
        self.lifecycle = lifecycle
        self.grace = grace
        self._drain_until: float | None = None
        self._drained_at: float | None = None  # the earliest a drain with nothing in flight may end

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # A signal handler: only set flags here; `on_tick` does the rest on the event loop.
        if sig == signal.SIGTERM and self._drain_until is None:
            self.lifecycle.draining = True
            now = time.monotonic()
            self._drain_until = now + self.grace
            self._drained_at = now + min(MIN_DRAIN_SECONDS, self.grace)
            return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        if self._drain_until is not None and self.lifecycle.on_drain:
            for hook in self.lifecycle.on_drain:
                hook()
            self.lifecycle.on_drain.clear()
        if self._drain_until is not None and not self.should_exit:
            if self.lifecycle.in_flight == 0 and time.monotonic() >= (self._drained_at or 0.0):
                logger.warning("SIGTERM: drained, exiting")
                self.should_exit = True
            elif time.monotonic() >= self._drain_until:
                logger.warning("SIGTERM: %d requests still in flight after %.0f s; exiting",
                               self.lifecycle.in_flight, self.grace)
                self.should_exit = True
            elif counter % 50 == 0:
                logger.warning("SIGTERM: draining, %d requests in flight", self.lifecycle.in_flight)
        return await super().on_tick(counter)


class CompanionServer(uvicorn.Server):
    """A second listener beside the main server, which alone handles the signals and says when this one stops."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def run_http(server: AgentAutomationServer, remote: RemoteSettings, *, host: str, port: int, policy: HostPolicy,
             per_request_auth: bool, metrics: Metrics) -> None:
    """Serve until stopped, on the event loop `loop_options` picks."""
    anyio.run(lambda: serve_http(server, remote, host=host, port=port, policy=policy,
                                 per_request_auth=per_request_auth, metrics=metrics), backend_options=loop_options())


def http_protocol() -> type[asyncio.Protocol] | str:
    """uvicorn's HTTP/1.1 parser: `httptools` (llhttp, in C) where it is installed (a dependency on CPython), with
    deadlines for each request's headers and for the rest of a body answered unread (deadlines.py), else h11, in
    Python: with uvicorn's protocol code around it, 7 % of a remote call's CPU against 2 % with httptools
    (docs/benchmarks.md, "Serving cost over HTTP"); h11 has no such deadlines (put HAProxy's `timeout http-request`
    in front). Imported, not only found, so a broken install falls back rather than failing at the first request."""
    try:
        import httptools  # noqa: F401
    except ImportError:
        return "h11"
    from .deadlines import DeadlineProtocol

    return DeadlineProtocol


def loop_options() -> dict[str, Any]:
    """uvloop where it is installed (a dependency everywhere but Windows): asyncio's own loop, in Python, was the
    largest single share of a remote call's CPU, a fifth of it (docs/benchmarks.md, "Serving cost over HTTP")."""
    return {"use_uvloop": importlib.util.find_spec("uvloop") is not None}


async def serve_http(server: AgentAutomationServer, remote: RemoteSettings, *, host: str, port: int,
                     policy: HostPolicy, per_request_auth: bool, metrics: Metrics) -> None:
    lifecycle = Lifecycle()
    # X-Forwarded-For names the client (for the per-address budgets) only as far as trusted proxies wrote it.
    app = ForwardedFor(build_app(server, remote, policy=policy, per_request_auth=per_request_auth, metrics=metrics,
                                 lifecycle=lifecycle), remote.trusted_proxies)
    # log_config=None: uvicorn's lines go through our handlers, in our format (JSON included); access_log=False:
    # remote/access.py writes the one line per request.
    config = uvicorn.Config(app, host=host.strip("[]"), port=port, http=http_protocol(), log_config=None,
                            access_log=False,
                            timeout_graceful_shutdown=FINAL_SHUTDOWN_SECONDS, lifespan="on", proxy_headers=False)
    main = DrainingServer(config, lifecycle, remote.shutdown_grace)
    if remote.metrics_port is None:
        await main.serve()
        return
    metrics_config = uvicorn.Config(build_metrics_app(server, metrics), host=host.strip("[]"), port=remote.metrics_port,
                                    log_config=None, access_log=False, lifespan="off")
    companion = CompanionServer(metrics_config)
    async with anyio.create_task_group() as group:
        group.start_soon(companion.serve)
        try:
            await main.serve()
        finally:
            companion.should_exit = True
