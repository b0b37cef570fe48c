"""One authenticated, validated request as a handler sees it, and how an operation is served."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ..api.operations import Operation
from .config import SandboxConfig
from .entities import Organization, User
from .state import SandboxState
from .world import World


@dataclass(frozen=True, slots=True)
class Call:
    state: SandboxState
    operation: Operation
    user: User
    path: dict[str, int]
    query: Any  # the operation's query model, or None
    body: Any  # the operation's body model, or None
    raw_body: Any  # the decoded JSON body as sent
    now: float  # time.monotonic()
    wall: float  # time.time()

    @property
    def world(self) -> World:
        return self.state.world

    @property
    def config(self) -> SandboxConfig:
        return self.state.config

    @property
    def org(self) -> Organization:
        return self.world.orgs[self.path["org_id"]]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """How one operation is served: its handler and the models its query string and body must fit."""

    handle: Callable[[Call], Any]  # returns a JSON value (200) or raises a `ServiceRefusal`
    query: type[BaseModel] | None = None
    body: type[BaseModel] | None = None
