"""The `/_sandbox/` controls: request log, fixture runs (the 10,000-entry trace), PR state, info."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import httpx2
import pytest

from agent_automation_mcp.sandbox import SandboxServer
from catalogue import ENDS_WITH_REASON

from .conftest import client_for, org_path


def test_the_request_log_can_be_read_filtered_and_cleared(api: httpx2.Client, sandbox: SandboxServer) -> None:
    api.get("/v1/users/me")
    api.post(org_path(sandbox, "/agent/run"), json={"prompt": "once"})
    log = httpx2.get(f"{sandbox.url}/_sandbox/requests").json()
    assert [r["operation"] for r in log] == ["get_current_user", "create_agent_run"]  # controls are not logged
    creates = httpx2.get(f"{sandbox.url}/_sandbox/requests", params={"operation": "create_agent_run"}).json()
    assert len(creates) == 1 and creates[0]["method"] == "POST" and creates[0]["status"] == 200
    assert httpx2.delete(f"{sandbox.url}/_sandbox/requests").json() == {"cleared": 2}
    assert httpx2.get(f"{sandbox.url}/_sandbox/requests").json() == []
    assert sandbox.request_log == []


def test_a_fixture_run_with_ten_thousand_entries_pages_to_a_short_end(sandbox: SandboxServer) -> None:
    run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={"log_entries": 10_000, "status": "COMPLETE"}).json()
    assert run["status"] == "COMPLETE" and run["organization_id"] == sandbox.org_id
    with client_for(sandbox) as api:
        path = org_path(sandbox, f"/agent/run/{run['id']}/logs")
        first = api.get(path, params={"limit": 100}).json()
        last = api.get(path, params={"skip": 9_950, "limit": 100}).json()
        newest = api.get(path, params={"limit": 1, "reverse": "true"}).json()["logs"][0]
    assert (first["total_logs"], first["pages"], len(first["logs"])) == (10_000, 100, 100)
    assert len(last["logs"]) == 50 and last["logs"][-1]["message_type"] == "FINAL_ANSWER" == newest["message_type"]


def test_fixture_runs_validate_their_body(sandbox: SandboxServer) -> None:
    url = f"{sandbox.url}/_sandbox/runs"
    assert httpx2.post(url, json={"log_entries": -1}).status_code == 422
    assert httpx2.post(url, json={"status": "SLEEPING"}).status_code == 422
    assert httpx2.post(url, json={"repo_id": 999}).status_code == 404
    assert httpx2.post(url, json={"pull_request_id": 999}).status_code == 404
    stopped = httpx2.post(url, json={"status": "STOPPED", "log_entries": 3, "repo_id": 202,
                                     "with_pull_request": True}).json()
    assert stopped["status"] == "STOPPED" and len(stopped["github_pull_requests"]) == 1


def test_state_and_info(sandbox: SandboxServer) -> None:
    prs = {pr["id"]: pr for pr in httpx2.get(f"{sandbox.url}/_sandbox/state/prs").json()}
    assert set(prs) >= {301, 302, 303, 304, 305, 306}
    assert prs[304]["merged"] and prs[302]["banned"] and prs[303]["banned"] and not prs[301]["banned"]
    info = httpx2.get(f"{sandbox.url}/_sandbox/info").json()
    assert info["org_id"] == sandbox.org_id and info["forbidden_org_id"] == sandbox.org_id + 1
    assert info["rate_limits"]["standard"] == "60/30s" and sandbox.token not in str(info)


@pytest.mark.parametrize("status", [*ENDS_WITH_REASON, "FAILED", "CANCELLED", "COMPLETE", "PAUSED"])
def test_a_run_ends_now_in_any_status_the_service_gives_or_pauses(sandbox: SandboxServer, status: str) -> None:
    run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={"status": "ACTIVE", "log_entries": 3}).json()
    ended = httpx2.post(f"{sandbox.url}/_sandbox/runs/{run['id']}/end", json={"status": status}).json()
    with client_for(sandbox) as api:
        read = api.get(org_path(sandbox, f"/agent/run/{run['id']}")).json()
    assert ended["status"] == read["status"] == status
    if status == "PAUSED":  # waiting: nothing moves, nothing is said of how it ended
        assert read["result"] is None
    elif status in ENDS_WITH_REASON:
        assert read["result"].startswith("The agent run stopped, ") and status in read["summary"]


def test_ending_a_run_refuses_what_is_no_end(sandbox: SandboxServer) -> None:
    run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={"status": "ACTIVE", "log_entries": 3}).json()
    assert httpx2.post(f"{sandbox.url}/_sandbox/runs/{run['id']}/end", json={"status": "ACTIVE"}).status_code == 422
    assert httpx2.post(f"{sandbox.url}/_sandbox/runs/999999/end", json={"status": "TIMEOUT"}).status_code == 404


def test_a_stuck_fixture_stays_active_with_its_last_step_long_ago(sandbox: SandboxServer) -> None:
    run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={"status": "EVALUATION", "log_entries": 4,
                                                            "idle_seconds": 1800, "goes_on": False}).json()
    with client_for(sandbox) as api:
        newest = api.get(org_path(sandbox, f"/agent/run/{run['id']}/logs"),
                         params={"limit": 1, "reverse": "true"}).json()
        read = api.get(org_path(sandbox, f"/agent/run/{run['id']}")).json()
    stamp = newest["logs"][0]["created_at"].replace(" ", "T").removesuffix("Z")
    idle = time.time() - datetime.fromisoformat(stamp).replace(tzinfo=UTC).timestamp()
    assert read["status"] == "EVALUATION" and 1790 < idle < 1900
