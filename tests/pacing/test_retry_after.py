"""A Retry-After from the service, over loopback: it pauses only the bucket it came from, and one longer than the
pacer will pause for is answered at once instead of being waited out."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import anyio
import httpx2
import pytest

from agent_automation_mcp.api import AgentAutomationClient, ApiTransport, Credentials
from agent_automation_mcp.api.errors import RateLimitError
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.pacing import create_pacer, sliding_log
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer

pytestmark = pytest.mark.anyio

HUGE = 99999


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(seed=5)) as server:
        yield server


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def client(request: pytest.FixtureRequest, sandbox: SandboxServer) -> AsyncIterator[AgentAutomationClient]:
    redis_url = None
    if request.param == "redis":
        redis = request.getfixturevalue("redis_server")
        redis.flush()
        redis_url = redis.url
    settings = ApiSettings(token=sandbox.token, org_id=sandbox.org_id, base_url=sandbox.url, timeout=5.0,
                           redis_url=redis_url)
    httpx2.delete(f"{sandbox.url}/_sandbox/requests").raise_for_status()
    async with ApiTransport(settings, create_pacer(settings)) as transport:
        yield AgentAutomationClient(transport, Credentials(sandbox.token, sandbox.org_id))
    httpx2.put(f"{sandbox.url}/_sandbox/faults", json={}).raise_for_status()


def refuse(sandbox: SandboxServer, operation: str, retry_after: float) -> None:
    httpx2.put(f"{sandbox.url}/_sandbox/faults", json={"throttle_rate": 1.0, "throttle_retry_after": retry_after,
                                                       "operations": [operation]}).raise_for_status()


def sent(sandbox: SandboxServer, operation: str) -> int:
    return len(httpx2.get(f"{sandbox.url}/_sandbox/requests", params={"operation": operation}).json())


async def test_an_absurd_retry_after_is_answered_at_once_and_pauses_only_its_bucket(
        client: AgentAutomationClient, sandbox: SandboxServer) -> None:
    run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={}).json()["id"]
    refuse(sandbox, "create_agent_run", HUGE)

    with anyio.fail_after(10):  # no deadline: a call that waited the Retry-After out would hang here
        with pytest.raises(RateLimitError) as caught:
            await client.create_agent_run(prompt="x")
    assert caught.value.retry_after == HUGE and "other tools still work" in caught.value.hint
    assert sent(sandbox, "create_agent_run") == 1  # not sent again

    # standard, which create_agent_run shares with every operation, is not paused: other tools go on at once.
    assert (await client.within(5).get_agent_run(run)).id == run
    # agent_creation is, for the clamped pause: a second create is refused without being sent.
    with pytest.raises(RateLimitError) as again:
        await client.within(5).create_agent_run(prompt="x")
    assert sliding_log.MAX_PAUSE - 5 < again.value.retry_after <= sliding_log.MAX_PAUSE
    assert "nothing was sent" in str(again.value)
    assert sent(sandbox, "create_agent_run") == 1


async def test_a_short_retry_after_is_waited_out_and_the_call_succeeds(
        client: AgentAutomationClient, sandbox: SandboxServer) -> None:
    run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={}).json()["id"]
    refuse(sandbox, "get_agent_run", 1)

    async def lift_the_fault() -> None:
        while not sent(sandbox, "get_agent_run"):
            await anyio.sleep(0.02)
        httpx2.put(f"{sandbox.url}/_sandbox/faults", json={}).raise_for_status()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lift_the_fault)
            assert (await client.within(20).get_agent_run(run)).id == run
    assert sent(sandbox, "get_agent_run") == 2  # refused once, then sent again after the pause


async def test_a_slot_that_leaves_no_time_for_the_request_is_answered_at_once(
        client: AgentAutomationClient, sandbox: SandboxServer) -> None:
    """Issue 20: after a pause, the call whose budget ends just after the pause is refused at once with the wait,
    not held for the whole pause only to fail; one whose budget leaves room for the request waits and succeeds."""
    run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={}).json()["id"]
    refuse(sandbox, "get_agent_run", 3)
    with pytest.raises(RateLimitError):  # a 3 s pause does not fit a 1 s budget
        await client.within(1).get_agent_run(run)
    httpx2.put(f"{sandbox.url}/_sandbox/faults", json={}).raise_for_status()

    with pytest.raises(RateLimitError) as caught:  # the slot comes about 0.3 s before the deadline
        await client.within(3.3).get_agent_run(run)
    # answered at once with the wait, not after the pause
    assert 2 < caught.value.retry_after <= 3 and "nothing was sent" in str(caught.value)
    assert (await client.within(6).get_agent_run(run)).id == run  # 2 s or more left after the slot: it waits
    assert sent(sandbox, "get_agent_run") == 2
