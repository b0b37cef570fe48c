"""Helpers for the end-to-end tests: environments, the server subprocess over stdio or HTTP, the error shape."""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

import anyio
import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families

from agent_automation_mcp.api.limits import DEFAULT_RATE_LIMITS
from agent_automation_mcp.sandbox import SandboxServer
from ports import free_port, listens
from schedstat import waited_since, waiting_for_cpu

MODES = ("auto", "legacy")  # 2026-07-28 (what `auto` lands on against this server) and the 2025-11-25 handshake
ERAS = {"auto": "2026-07-28", "legacy": "2025-11-25"}
# What replicas sharing Redis must be given alike (they refuse to start without): test values, not secrets.
SHARED_KEYS = {"AGENT_AUTOMATION_STATE_KEYS": "test-state-key-" + "s" * 32,
               "AGENT_AUTOMATION_LOG_SECRET": "test-log-secret-" + "l" * 16}


def roomy_limits(count: int = 2000, **counts: int) -> str:
    """Every bucket of the service's limits (`DEFAULT_RATE_LIMITS`, a new one included) at `count` requests, or at
    `counts[bucket]`, per a tenth of its window. Pacing is not under test here, and several server processes share
    one sandbox: room for all of them. A tenth: a replica that loses Redis sends nothing for a window
    (pacing/redis_ledger.py), so the tests that take Redis away wait 3 s, not 30."""
    unknown = set(counts) - set(DEFAULT_RATE_LIMITS)
    assert not unknown, f"no such rate-limit buckets: {sorted(unknown)}"
    return ",".join(f"{name}={counts.get(name, count)}/{limit.window / 10:g}s"
                    for name, limit in DEFAULT_RATE_LIMITS.items())


RATE_LIMITS = roomy_limits()


def clean_env(**values: str | None) -> dict[str, str]:
    """This process's environment without any of our settings, plus `values` (None removes)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_AUTOMATION_", "CODEGEN_"))}
    env.update({k: v for k, v in values.items() if v is not None})
    return env


def sandbox_env(sandbox: SandboxServer, **values: str | None) -> dict[str, str]:
    base = {"AGENT_AUTOMATION_BASE_URL": sandbox.url, "AGENT_AUTOMATION_API_TOKEN": sandbox.token,
            "AGENT_AUTOMATION_ORG_ID": str(sandbox.org_id), "AGENT_AUTOMATION_RATE_LIMITS": RATE_LIMITS}
    return clean_env(**(base | values))


def stdio_server(env: Mapping[str, str], *args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "agent_automation_mcp", *args], env=dict(env))


# Servers started and not stopped yet. A test that starts several and fails before its `finally` (one of them not
# listening in time, under load) would leave the others running for good: they are ended as this process exits.
_RUNNING: set[subprocess.Popen[bytes]] = set()


@atexit.register
def _end_the_forgotten() -> None:
    for process in _RUNNING:
        process.kill()
        process.wait()


# How long a server may take to listen: seconds it was not kept waiting for a CPU (a start imports and builds the
# app, about 2.5 s of CPU for a replica with OAuth, Redis and metrics), and seconds in all, however busy the machine.
START_SECONDS: Final = 20.0
START_CAP: Final = 120.0


class PortTaken(RuntimeError):
    """Another process bound the port first."""


class HttpServer:
    """`agent-automation-mcp --transport http` on a free port of a loopback address; or `command`, a whole command
    line that listens on `host` and `port`."""

    def __init__(self, env: Mapping[str, str], *args: str, host: str = "127.0.0.1", port: int | None = None,
                 command: Sequence[str] | None = None) -> None:
        self.host = host
        # Should the port be taken before the server binds it all the same, it starts again on another (only on a
        # port of our choosing).
        for attempt in range(1, 4):
            self.port = port or free_port()
            self.origin = f"http://{f'[{host}]' if ':' in host else host}:{self.port}"
            self.url = f"{self.origin}/mcp"
            try:
                self._start(env, command or [sys.executable, "-m", "agent_automation_mcp", "serve", "--transport",
                                             "http", "--host", host, "--port", str(self.port), *args])
                return
            except PortTaken:
                if port is not None or attempt == 3:
                    raise

    def _start(self, env: Mapping[str, str], command: Sequence[str]) -> None:
        """Start `command` and return once it listens itself: a listener of another process on the port is not
        taken for it (that one may be gone at the test's first request)."""
        # A file, not a pipe: a pipe nobody reads fills up and blocks the server. Closed by `stop`.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        self.process = subprocess.Popen(command, env=dict(env), stdout=subprocess.DEVNULL, stderr=self._stderr)
        _RUNNING.add(self.process)
        started, waited = time.monotonic(), waiting_for_cpu(self.process.pid)
        while True:
            if self.process.poll() is not None:
                stderr = self.stop()
                if "address already in use" in stderr.lower():
                    raise PortTaken(f"port {self.port} was taken before the server bound it: {stderr}")
                raise RuntimeError(f"the HTTP server exited: {stderr}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    pass
                if listens(self.process.pid, self.port) is not False:
                    return
            except OSError:
                pass
            time.sleep(0.05)
            # Its own time: a machine busy elsewhere keeps a start waiting for a CPU, which is not a server hung.
            elapsed = time.monotonic() - started
            kept_waiting = max(waited_since(waited, waiting_for_cpu(self.process.pid)), default=0.0)
            if elapsed - kept_waiting > START_SECONDS or elapsed > START_CAP:
                break
        self.stop()
        raise RuntimeError(f"the HTTP server did not start listening within {START_SECONDS:g} s of its own time "
                           f"({elapsed:.1f} s in all, {kept_waiting:.1f} s of it waiting for a CPU)")

    def stderr_so_far(self) -> str:
        """What the running server wrote on stderr until now (read without moving the offset it writes at)."""
        fd = self._stderr.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def stop(self) -> str:
        """Stop the server (SIGTERM) and return what it wrote on stderr."""
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        _RUNNING.discard(self.process)
        with self._stderr:
            self._stderr.seek(0)
            return self._stderr.read().decode()


def metric(server: HttpServer, name: str) -> float:
    """The sum of the samples named `name` (every label set) on the server's `/metrics`."""
    text = httpx2.get(f"{server.origin}/metrics", timeout=10).text
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == name)


def http_servers(count: int, env: Mapping[str, str], *args: str) -> list[HttpServer]:
    """`count` replicas alike. One that cannot start stops those started before it: on a loaded machine a list
    comprehension left them running, orphaned, after the test had failed."""
    servers: list[HttpServer] = []
    try:
        for _ in range(count):
            servers.append(HttpServer(env, *args))
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


def tenant_client(url: str, mode: str = "auto", **headers: str) -> Client:
    """The SDK's client sending `headers` (e.g. `authorization="Bearer ..."`) with every request."""
    http = httpx2.AsyncClient(headers={name.replace("_", "-"): value for name, value in headers.items()},
                              timeout=httpx2.Timeout(30, read=120))
    return Client(streamable_http_client(url, http_client=http), mode=mode)


async def refusal_shown(client: Client) -> MCPError:
    """The error the SDK's client raises when the server refuses its first request (as its user would see it)."""
    caught: list[BaseException] = []
    try:
        async with client as session:
            await session.call_tool("list_models", {})
    except* MCPError as group:
        caught = _leaves(group)
    assert len(caught) == 1 and isinstance(caught[0], MCPError), caught
    return caught[0]


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    return [leaf for exc in group.exceptions
            for leaf in (_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])]


def error_of(result: Any) -> dict[str, Any]:
    assert result.is_error, result
    error = result.structured_content["error"]
    assert {"kind", "status", "message", "hint"} <= set(error) <= {
        "kind", "status", "message", "retry_after_seconds", "details", "hint"}
    assert len(result.content) == 1 and "\n" not in result.content[0].text
    return error


async def thirty_waiting_calls(client: Client, run_id: int) -> list[Any]:
    """Thirty `get_agent_run` calls at once, each waiting on the run, so that all are in flight together."""
    calls: list[Any] = []

    async def caller() -> None:
        calls.append(await client.call_tool("get_agent_run", {"agent_run_id": run_id, "wait_seconds": 1}))

    async with anyio.create_task_group() as group:
        for _ in range(30):
            group.start_soon(caller)
    return calls
