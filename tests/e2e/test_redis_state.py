"""A replica whose Redis URL has never answered says so: at start in its log, in /readyz and in /metrics; and it is
not ready, so a rolling update with a wrong URL stalls on its first new pod while the old ones keep serving."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

import httpx2
import pytest
from harness import RATE_LIMITS, SHARED_KEYS, HttpServer, clean_env, free_port, metric
from prometheus_client.parser import text_string_to_metric_families

from agent_automation_mcp.sandbox import SandboxServer
from pacing.redis_server import RedisServer, running_redis


def never_reached(sandbox: SandboxServer) -> HttpServer:
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    return HttpServer(clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS,
                                AGENT_AUTOMATION_REDIS_URL=url, **SHARED_KEYS), "--auth", "request")


def test_a_redis_url_that_never_answered_is_logged_at_start(sandbox: SandboxServer) -> None:
    stderr = never_reached(sandbox).stop()  # not one request: only the start
    assert "has not answered since this replica started" in stderr and "AGENT_AUTOMATION_REDIS_URL" in stderr


def test_a_redis_url_that_never_answered_is_said_in_readyz_and_metrics(sandbox: SandboxServer) -> None:
    replica = never_reached(sandbox)
    try:
        ready = httpx2.get(f"{replica.origin}/readyz", timeout=10)
        text = httpx2.get(f"{replica.origin}/metrics", timeout=10).text
    finally:
        replica.stop()
    # Not ready: the rollout stops here (Redis lost after it was reached keeps a replica ready: test_remote.py).
    assert ready.status_code == 503 and ready.json() == {"ready": False, "draining": False, "redis": "never reached"}
    states = {sample.labels["state"]: sample.value for family in text_string_to_metric_families(text)
              for sample in family.samples if sample.name == "agent_automation_redis_state"}
    assert states == {"reachable": 0, "unreachable": 0, "never reached": 1, "not configured": 0}


@pytest.mark.parametrize("missing", sorted(SHARED_KEYS))
def test_replicas_sharing_redis_refuse_to_start_without_the_shared_keys(sandbox: SandboxServer, missing: str) -> None:
    env = clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
                    **{**SHARED_KEYS, missing: ""})
    command = [sys.executable, "-m", "agent_automation_mcp", "--transport", "http", "--port", str(free_port()),
               "--auth", "request"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and f"error: {missing} must be set when replicas share Redis" in done.stderr


def test_a_replica_started_before_its_redis_turns_ready_once_redis_answers(sandbox: SandboxServer) -> None:
    """A cold start where Redis comes up after the replicas: they are not left unready for good."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    redis = RedisServer(binary)  # not started yet: nothing listens on its port
    replica = HttpServer(clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS,
                                   AGENT_AUTOMATION_REDIS_URL=redis.url, **SHARED_KEYS), "--auth", "request")
    try:
        assert httpx2.get(f"{replica.origin}/readyz", timeout=10).status_code == 503
        redis.start()
        for _ in range(50):  # bounded: Redis is tried again a few seconds after a failure
            ready = httpx2.get(f"{replica.origin}/readyz", timeout=10)
            if ready.status_code == 200:
                break
            time.sleep(0.2)
        assert ready.status_code == 200 and ready.json()["redis"] == "reachable"
    finally:
        replica.stop()
        redis.stop()


# A clock an hour behind, for the whole process: what `time.time` says (as a node's bad clock would).
BEHIND: Final = "import time\n_real = time.time\ntime.time = lambda: _real() - 3600\n"


def test_a_replica_whose_clock_is_an_hour_off_says_so_in_its_metrics_and_its_log(
        sandbox: SandboxServer, tmp_path: Path) -> None:
    """Issue 45: a replica whose clock was an hour off refused the fleet's tokens with no signal."""
    (tmp_path / "sitecustomize.py").write_text(BEHIND)
    with running_redis() as redis:
        replica = HttpServer(clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_REDIS_URL=redis.url,
                                       AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS, PYTHONPATH=str(tmp_path),
                                       **SHARED_KEYS), "--auth", "request")
        try:
            offset = 0.0
            for _ in range(40):  # bounded: the replica looks at Redis at start, then every 5 s
                offset = metric(replica, "agent_automation_clock_offset_seconds")
                if offset:
                    break
                time.sleep(0.5)
        finally:
            stderr = replica.stop()
    assert -3660 < offset < -3540
    assert "this replica's clock is 3600 s behind Redis'" in stderr
