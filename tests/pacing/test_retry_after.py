"""A Retry-After from the service, over loopback: it pauses only the bucket it came from, and one longer than the
pacer will pause for is answered at once instead of being waited out."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx2
import pytest

from agent_automation_mcp.api import AgentAutomationClient, ApiTransport, Credentials
from agent_automation_mcp.api.errors import RateLimitError
from agent_automation_mcp.api.limits import AGENT_CREATION, DEFAULT_RATE_LIMITS
from agent_automation_mcp.api.operations import OPERATIONS
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.pacing import create_pacer, sliding_log
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from sandbox_faults import refuse, set_faults

from .redis_server import RedisServer

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
    set_faults(sandbox)


def sent(sandbox: SandboxServer, operation: str) -> int:
    return len(httpx2.get(f"{sandbox.url}/_sandbox/requests", params={"operation": operation}).json())


async def test_an_absurd_retry_after_is_answered_at_once_and_pauses_only_its_bucket(
        client: AgentAutomationClient, sandbox: SandboxServer) -> None:
    run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={}).json()["id"]
    refuse(sandbox, "create_agent_run", HUGE)

    with anyio.fail_after(10):  # no deadline: a call that waited the Retry-After out would hang here
        with pytest.raises(RateLimitError) as caught:
            await client.create_agent_run(prompt="x")
    assert caught.value.retry_after == HUGE and f"asked to wait {HUGE} s" in caught.value.message
    assert caught.value.limits == ("agent_creation", "standard")  # which it refused, the service does not say
    assert "does not say which it refused" in caught.value.hint and "still work" not in caught.value.hint
    assert sent(sandbox, "create_agent_run") == 1  # not sent again

    # standard, which create_agent_run shares with every operation, is not paused: other tools go on at once.
    assert (await client.within(5).get_agent_run(run)).id == run
    # agent_creation is: a second create is refused without being sent, with the service's cause and wait (not the
    # pause's 120 s), naming the limit that holds it back.
    with pytest.raises(RateLimitError) as again:
        await client.within(5).create_agent_run(prompt="x")
    assert HUGE - 10 < again.value.retry_after <= HUGE and again.value.limits == ("agent_creation",)
    assert again.value.message.startswith("the service refused a request of this API token")
    assert f"asked to wait {HUGE} s" in again.value.message
    assert f"{AGENT_CREATION} ({DEFAULT_RATE_LIMITS[AGENT_CREATION]})" in again.value.message
    assert "nothing was sent" in str(again.value) and "rate limit (" not in again.value.message
    assert sent(sandbox, "create_agent_run") == 1


@pytest.mark.redis
async def test_after_a_long_retry_after_on_standard_any_replica_names_the_services_cause_and_wait(
        sandbox: SandboxServer, redis_server: RedisServer) -> None:
    """Issue 47: a 429 asking 150 s on an operation counted against standard only. The answer says so and that every
    operation counts against standard; the next call, on another replica, is held back by the pause and says the
    service's cause and its wait (not this server's limit, nor the pause's 120 s)."""
    redis_server.flush()
    run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={}).json()["id"]
    settings = ApiSettings(token=sandbox.token, org_id=sandbox.org_id, base_url=sandbox.url, timeout=5.0,
                           redis_url=redis_server.url)
    refuse(sandbox, "get_agent_run", 150)
    async with ApiTransport(settings, create_pacer(settings)) as one, \
            ApiTransport(settings, create_pacer(settings)) as other:
        with pytest.raises(RateLimitError) as refused:
            await AgentAutomationClient(one, Credentials(sandbox.token, sandbox.org_id)).within(10).get_agent_run(run)
        before = sent(sandbox, "list_agent_runs")
        with pytest.raises(RateLimitError) as held:
            await AgentAutomationClient(other, Credentials(sandbox.token, sandbox.org_id)).within(10).list_agent_runs()
    set_faults(sandbox)
    assert refused.value.retry_after == 150 and "asked to wait 150 s" in refused.value.message
    assert refused.value.limits == ("standard",) and "It refused under its limit standard (" in refused.value.hint
    assert refused.value.shared_by["standard"] == frozenset(OPERATIONS)  # every operation counts against it
    assert held.value.message.startswith("the service refused a request of this API token")
    assert "asked to wait 150 s" in held.value.message and "standard (" in held.value.message
    assert sliding_log.MAX_PAUSE < held.value.retry_after <= 150  # the service's wait, not the pause's
    assert held.value.shared_by["standard"] == frozenset(OPERATIONS)
    assert sent(sandbox, "list_agent_runs") == before  # nothing was sent


async def test_a_short_retry_after_is_waited_out_and_the_call_succeeds(
        client: AgentAutomationClient, sandbox: SandboxServer) -> None:
    run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={}).json()["id"]
    refuse(sandbox, "get_agent_run", 1)

    async def lift_the_fault() -> None:
        while not sent(sandbox, "get_agent_run"):
            await anyio.sleep(0.02)
        set_faults(sandbox)

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
    paused_until = time.monotonic() + 3  # at the latest: the 429 came back before
    set_faults(sandbox)

    with pytest.raises(RateLimitError) as caught:  # the slot comes about 0.3 s before the deadline
        await client.within(paused_until + 0.3 - time.monotonic()).get_agent_run(run)
    # answered at once with the wait, not after the pause (however long this process was held up before asking)
    assert 0 < caught.value.retry_after <= 3 and "nothing was sent" in str(caught.value)
    assert (await client.within(6).get_agent_run(run)).id == run  # 2 s or more left after the slot: it waits
    assert sent(sandbox, "get_agent_run") == 2
