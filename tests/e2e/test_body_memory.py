"""A stranger's request bodies cost a replica no more than their bytes: a flood of 1 MiB bodies of empty JSON
objects (25 MB of Python objects each, once parsed), without a token and with junk ones, over real HTTP, leaves
the replica's peak resident memory within a bound, and a colleague is served after. A test of memory, not of time:
the full-size flood through the balancer, with a colleague's latency, is benchmarks/body_flood.py."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Final

import anyio
import httpx2
import pytest
from harness import HttpServer, sandbox_env

from agent_automation_mcp.sandbox import SandboxServer

BODY: Final = b"[" + b"{}," * (1024 * 1024 // 3 - 1) + b"{}]"  # 1 MiB
CONNECTIONS: Final = 20
BODIES: Final = 60  # a third with a junk token each
BOUND_MIB: Final = 40  # parsed, 20 such bodies at once were 500 MB


def memory_mib(pid: int) -> dict[str, float]:
    """VmRSS (now) and VmHWM (the peak since start), in MiB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0]) / 1024
    return values


@pytest.mark.anyio
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads a process's memory from /proc")
async def test_a_strangers_large_bodies_leave_a_replicas_memory_within_a_bound(sandbox: SandboxServer) -> None:
    replica = HttpServer(sandbox_env(sandbox, AGENT_AUTOMATION_API_TOKEN=None, AGENT_AUTOMATION_ORG_ID=None),
                         "--auth", "request", "--allowed-org", "*")
    try:
        url = f"{replica.url}"
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient(timeout=60, limits=httpx2.Limits(max_connections=CONNECTIONS)) as http:
            assert (await http.post(url, content=b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
                                    headers=headers)).status_code == 401  # warm
            before = memory_mib(replica.process.pid)
            answers: list[int] = []

            async def stranger(index: int) -> None:
                junk = {"authorization": f"Bearer junk-{secrets.token_hex(8)}"} if index % 3 == 0 else {}
                answers.append((await http.post(url, content=BODY, headers=headers | junk)).status_code)

            async with anyio.create_task_group() as group:
                for index in range(BODIES):
                    group.start_soon(stranger, index)
            after = memory_mib(replica.process.pid)
            colleague = await http.post(url, headers=headers | {"authorization": f"Bearer {sandbox.token}"},
                                        json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                                            "name": "list_models", "arguments": {}}})
    finally:
        replica.stop()
    assert sorted(set(answers)) == [401] and len(answers) == BODIES
    assert colleague.status_code == 200 and '"isError":false' in colleague.text.replace(" ", "")
    grown = after["VmHWM"] - max(before["VmHWM"], before["VmRSS"])
    assert grown < BOUND_MIB, (before, after)
