"""The Streamable HTTP app: `/mcp` behind the gate, stateless in both protocol eras, and the operations endpoints.

Stateless serving keeps nothing between requests in one replica's memory (no session ids), so a load
balancer may send each request to any replica, including a legacy-era client's requests after its
`initialize`; and there are no idle sessions to pile up.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..config import RemoteSettings
from ..server import AgentAutomationServer
from .access import AccessLog
from .budgets import AddressBudgets, Budget
from .connections import OpenConnections
from .gate import Lifecycle, McpGate, token_requests_budget
from .hosts import HostPolicy
from .metrics import CONTENT_TYPE, Metrics
from .organizations import AllowedOrganizations
from .redis_watch import RedisWatch
from .verdicts import TokenVerdicts, strangers_budget

if TYPE_CHECKING:
    from .oauth.signin import SignIn

logger = logging.getLogger(__name__)



def build_app(server: AgentAutomationServer, remote: RemoteSettings, *, policy: HostPolicy, per_request_auth: bool,
              metrics: Metrics, lifecycle: Lifecycle) -> Starlette:
    # The SDK builds the session manager; our own routes and gate replace its app. Host and Origin are checked
    # by the gate, on every bind address, so the SDK's own check (loopback names only) is off.
    server.streamable_http_app(stateless_http=True, max_request_body_size=remote.max_body_bytes,
                               transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    metrics.expect((spec.name for spec in server.tool_specs), server.api_settings.rate_limits,
                   sign_in=remote.auth == "oauth")
    budgets = AddressBudgets(server.shared, _budget_purposes(remote), remote.vouched_networks)
    verdicts = TokenVerdicts(server.shared, budgets, organizations=AllowedOrganizations.of(remote.allowed_orgs))
    sign_in = None
    if remote.auth == "oauth":
        from .oauth.signin import SignIn

        sign_in = SignIn.from_settings(remote, server.shared, verdicts,
                                       lambda: server.state.transport if server.state is not None else None, metrics)
    watch = RedisWatch(server.shared, metrics)
    if sign_in is not None:
        watch.listeners.append(sign_in.grants.ends.synced)
    gate = McpGate(server.session_manager.handle_request, server, policy, lifecycle,
                   per_request_auth=per_request_auth, verdicts=verdicts, sign_in=sign_in, budgets=budgets,
                   max_body_bytes=remote.max_body_bytes, body_bytes_held=remote.body_bytes_held)
    lifecycle.on_drain.append(server.tasks.reads.end_streams)
    # With a metrics port, /metrics is served there only (a NetworkPolicy admits the scraper to it): the public
    # port answers it 404, so what one replica did is not told to whoever reaches /mcp.
    routes = [Route("/mcp", AccessLog(gate, metrics), methods=["GET", "POST", "DELETE"]),
              Route("/healthz", healthz, methods=["GET"]),
              readyz_route(server, lifecycle),
              *(sign_in.routes() if sign_in is not None else ()),
              *((metrics_route(server, metrics),) if remote.metrics_port is None else ())]
    return Starlette(routes=routes, lifespan=_lifespan(server, lifecycle, sign_in, watch, verdicts),
                     middleware=[Middleware(OpenConnections, metrics=metrics)])


def _budget_purposes(remote: RemoteSettings) -> list[Budget]:
    """What a client address (and its network) may spend: token checks, task requests, and sign-ins with OAuth."""
    purposes = [strangers_budget(remote.token_checks_per_address, remote.token_checks_per_network,
                                 remote.token_checks_total), token_requests_budget(remote.requests_per_token)]
    if remote.auth == "oauth":
        from .oauth.signin import signin_budgets

        purposes += signin_budgets(remote.oauth_signins)
    return purposes


def _lifespan(server: AgentAutomationServer, lifecycle: Lifecycle, sign_in: SignIn | None, watch: RedisWatch,
              verdicts: TokenVerdicts) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run(), anyio.create_task_group() as behind:
            await _redis_state(server)  # reach Redis now: a URL that does not answer is logged at start
            if server.state is not None:
                server.state.transport.open()  # so that no request waits for the HTTP client to be made
            behind.start_soon(watch.run)
            verdicts.recheck_in(behind)  # a known tenant is served while its token's check runs behind
            lifecycle.ready = True
            try:
                yield
            finally:
                lifecycle.ready = False
                behind.cancel_scope.cancel()
                if sign_in is not None:
                    await sign_in.close()

    return lifespan


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "alive"})


def readyz_route(server: AgentAutomationServer, lifecycle: Lifecycle) -> Route:
    async def readyz(request: Request) -> Response:
        redis = await _redis_state(server)
        # Redis configured but never reached (a wrong URL, a missing Secret): not ready, so a rolling update stalls
        # on this pod while the old ones keep serving. Reached once and lost since: ready, at the local share.
        ready = lifecycle.serving and redis != "never reached"
        body = {"ready": ready, "draining": lifecycle.draining, "redis": redis}
        return JSONResponse(body, status_code=200 if ready else 503)

    return Route("/readyz", readyz, methods=["GET"])


def metrics_route(server: AgentAutomationServer, metrics: Metrics) -> Route:
    async def metrics_endpoint(request: Request) -> Response:
        return Response(metrics.exposition(await _redis_state(server)), media_type=CONTENT_TYPE)

    return Route("/metrics", metrics_endpoint, methods=["GET"])


def build_metrics_app(server: AgentAutomationServer, metrics: Metrics) -> Starlette:
    """What the metrics port serves: `/metrics` and nothing else."""
    return Starlette(routes=[metrics_route(server, metrics)])


async def _redis_state(server: AgentAutomationServer) -> str:
    """One of REDIS_STATES. Unreachable or never reached, pacing is local (at the replica's share of each limit):
    a replica that lost Redis serves on safely; one that never reached it is not ready (see `readyz`)."""
    state: Any = server.state
    pacer = state.transport.pacer if state is not None else None
    shared = await pacer.store_state() if pacer is not None else None
    return shared or "not configured"
