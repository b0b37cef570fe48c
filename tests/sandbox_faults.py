"""Faults set on a running sandbox through its control API, for the tests of every layer."""

from __future__ import annotations

from typing import Any

import httpx2

from agent_automation_mcp.sandbox import SandboxServer


def set_faults(sandbox: SandboxServer, **faults: Any) -> None:
    """The sandbox's faults from now on (`sandbox.config.Faults`' fields); none given: back to no faults."""
    httpx2.put(f"{sandbox.url}/_sandbox/faults", json=faults).raise_for_status()


def refuse(sandbox: SandboxServer, operation: str, retry_after: float) -> None:
    """Every request for `operation` answered 429, asking to wait `retry_after` s."""
    set_faults(sandbox, throttle_rate=1.0, throttle_retry_after=retry_after, operations=[operation])
