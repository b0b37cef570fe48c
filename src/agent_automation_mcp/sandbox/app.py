"""`create_app`: the sandbox as a Starlette application."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp

from .config import SandboxConfig
from .control import control_routes
from .errors import http_exception
from .recorder import RequestRecorder
from .routes import operation_routes
from .state import SandboxState


class SandboxApp(Starlette):
    """A Starlette app whose outermost layer records requests (and can drop connections)."""

    def build_middleware_stack(self) -> ASGIApp:
        return RequestRecorder(super().build_middleware_stack(), self.state.sandbox)


def create_app(config: SandboxConfig | None = None) -> Starlette:
    """The sandbox app; its state (world, request log, faults) is `app.state.sandbox`, the world also
    `app.state.world`."""
    state = SandboxState.from_config(config or SandboxConfig())
    app = SandboxApp(routes=[*control_routes(state), *operation_routes(state)],
                     exception_handlers={HTTPException: http_exception})
    app.state.sandbox = state
    app.state.world = state.world
    return app
