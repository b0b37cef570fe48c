"""The Streamable HTTP app: `/mcp` behind the gate, stateless in both protocol eras, and the operations endpoints.

Stateless serving keeps nothing between requests in one replica's memory (no session ids), so a load
balancer may send each request to any replica, including a legacy-era client's requests after its
`initialize`; and there are no idle sessions to pile up.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings
from prometheus_client import Gauge
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..config import RemoteSettings
from ..server import AgentAutomationServer
from .gate import Lifecycle, McpGate
from .hosts import HostPolicy
from .metrics import CONTENT_TYPE, Metrics

logger = logging.getLogger(__name__)

REDIS_STATES = ("reachable", "unreachable", "never reached", "not configured")  # `redis` in /readyz


def build_app(server: AgentAutomationServer, remote: RemoteSettings, *, policy: HostPolicy, per_request_auth: bool,
              metrics: Metrics, lifecycle: Lifecycle) -> Starlette:
    # The SDK builds the session manager; our own routes and gate replace its app. Host and Origin are checked
    # by the gate, on every bind address, so the SDK's own check (loopback names only) is off.
    server.streamable_http_app(stateless_http=True, max_request_body_size=remote.max_body_bytes,
                               transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    manager = server.session_manager
    gate = McpGate(manager.handle_request, server, policy, lifecycle, per_request_auth=per_request_auth)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "alive"})

    async def readyz(request: Request) -> Response:
        redis = await _redis_state(server)
        body = {"ready": lifecycle.serving, "draining": lifecycle.draining, "redis": redis}
        return JSONResponse(body, status_code=200 if lifecycle.serving else 503)

    redis_state = Gauge("agent_automation_redis_state", "1 for the shared pacing store's state now: reachable, "
                        "unreachable, never reached (since start: a wrong URL?) or not configured.", ("state",),
                        registry=metrics.registry)

    async def metrics_endpoint(request: Request) -> Response:
        state = await _redis_state(server)
        for each in REDIS_STATES:
            redis_state.labels(state=each).set(1 if each == state else 0)
        return Response(metrics.exposition(state == "reachable"), media_type=CONTENT_TYPE)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            await _redis_state(server)  # reach Redis now: a URL that does not answer is logged at start
            lifecycle.ready = True
            try:
                yield
            finally:
                lifecycle.ready = False

    return Starlette(routes=[
        Route("/mcp", gate, methods=["GET", "POST", "DELETE"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
    ], lifespan=lifespan)


async def _redis_state(server: AgentAutomationServer) -> str:
    """One of REDIS_STATES. Unreachable or never reached, pacing is local (at the replica's share of each limit) and
    the replica stays ready: it serves safely, and a wrong URL on every replica must not take the service down."""
    state: Any = server.state
    pacer = state.transport.pacer if state is not None else None
    shared = await pacer.store_state() if pacer is not None else None
    return shared or "not configured"
