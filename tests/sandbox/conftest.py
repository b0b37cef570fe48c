"""Sandboxes on loopback and plain HTTP clients for them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest

from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer

MakeSandbox = Callable[..., SandboxServer]


@pytest.fixture
def make_sandbox() -> Iterator[MakeSandbox]:
    """`make_sandbox(**SandboxConfig fields)` → a running server, stopped after the test."""
    servers: list[SandboxServer] = []

    def make(**config: Any) -> SandboxServer:
        server = SandboxServer(SandboxConfig(**config)).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def sandbox(make_sandbox: MakeSandbox) -> SandboxServer:
    return make_sandbox(run_seconds=0.4, seed=7)


@pytest.fixture
def api(sandbox: SandboxServer) -> Iterator[httpx2.Client]:
    with client_for(sandbox) as client:
        yield client


def client_for(sandbox: SandboxServer, token: str | None = "default") -> httpx2.Client:
    """A client sending `token` (the demo token by default; None sends no Authorization header)."""
    headers = {} if token is None else {"Authorization": f"Bearer {sandbox.token if token == 'default' else token}"}
    return httpx2.Client(base_url=sandbox.url, headers=headers, timeout=10.0)


def org_path(sandbox: SandboxServer, suffix: str = "", org_id: int | None = None) -> str:
    return f"/v1/organizations/{sandbox.org_id if org_id is None else org_id}{suffix}"
