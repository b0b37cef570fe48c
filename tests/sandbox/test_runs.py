"""Run life cycle on the clock, traces, resume, logs paging and both logs paths."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx2
import pytest

from agent_automation_mcp.sandbox import SandboxServer
from agent_automation_mcp.sandbox.trace import MESSAGE_TYPES

from .conftest import MakeSandbox, client_for, org_path

Json = dict[str, Any]


def wait_for(check: Callable[[], Json | None], seconds: float = 5.0) -> Json:
    """Poll `check` (bounded) until it returns a value."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value is not None:
            return value
        time.sleep(0.02)
    raise AssertionError("timed out")


def finished(api: httpx2.Client, sandbox: SandboxServer, run_id: int) -> Json:
    def check() -> Json | None:
        run = api.get(org_path(sandbox, f"/agent/run/{run_id}")).json()
        return run if run["status"] != "ACTIVE" else None
    return wait_for(check)


def all_logs(api: httpx2.Client, sandbox: SandboxServer, run_id: int) -> list[Json]:
    return api.get(org_path(sandbox, f"/agent/run/{run_id}/logs")).json()["logs"]


def assert_populated(entry: Json) -> None:
    """The contract's population table."""
    kind = entry["message_type"]
    if kind == "ACTION":
        assert entry["tool_name"] and isinstance(entry["tool_input"], dict) and entry["tool_output"] is not None
    elif kind == "PLAN_EVALUATION":
        assert entry["thought"]
    elif kind in ("ERROR", "FINAL_ANSWER"):
        assert entry["observation"]
    assert set(entry) == {"agent_run_id", "created_at", "tool_name", "message_type", "thought", "observation",
                          "tool_input", "tool_output"}


def test_a_run_moves_from_active_to_complete_with_a_pull_request_and_every_message_type(
        make_sandbox: MakeSandbox) -> None:
    sandbox = make_sandbox(run_seconds=1.0, run_error_fraction=0.0)
    with client_for(sandbox) as api:
        created = api.post(org_path(sandbox, "/agent/run"), json={"prompt": "Fix the bug", "repo_id": 201}).json()
        assert created["status"] == "ACTIVE" and created["result"] is None and created["github_pull_requests"] == []
        assert created["web_url"] == f"https://codegen.com/agent/trace/{created['id']}"
        assert created["source_type"] == "API"
        early = api.get(org_path(sandbox, f"/agent/run/{created['id']}/logs")).json()
        run = finished(api, sandbox, created["id"])
        logs = all_logs(api, sandbox, created["id"])
    assert early["status"] == "ACTIVE" and 1 <= early["total_logs"] < len(logs)  # entries accumulate on the clock
    assert run["status"] == "COMPLETE" and run["result"] and run["summary"]
    [pr] = run["github_pull_requests"]
    assert pr["url"].startswith("https://github.com/sandbox-org/web-app/pull/") and pr["created_at"]
    assert {entry["message_type"] for entry in logs} == set(MESSAGE_TYPES)
    assert logs[-1]["message_type"] == "FINAL_ANSWER"
    for entry in logs:
        assert_populated(entry)
        assert entry["agent_run_id"] == created["id"]
    opened = next(e for e in logs if e["message_type"] == "INITIAL_PR_GENERATION")
    assert opened["observation"]["pr_url"] == pr["url"]
    assert [e["created_at"] for e in logs] == sorted(e["created_at"] for e in logs)


def test_some_runs_end_in_error(make_sandbox: MakeSandbox) -> None:
    sandbox = make_sandbox(run_seconds=0.2, run_error_fraction=1.0)
    with client_for(sandbox) as api:
        run_id = api.post(org_path(sandbox, "/agent/run"), json={"prompt": "Doomed"}).json()["id"]
        run = finished(api, sandbox, run_id)
        last = all_logs(api, sandbox, run_id)[-1]
    assert run["status"] == "ERROR" and run["result"]
    assert last["message_type"] == "ERROR" and last["observation"]


def test_resume_appends_the_user_message_and_makes_the_run_active_again(make_sandbox: MakeSandbox) -> None:
    sandbox = make_sandbox(run_seconds=0.3, run_error_fraction=0.0)
    with client_for(sandbox) as api:
        run_id = api.post(org_path(sandbox, "/agent/run"), json={"prompt": "First", "repo_id": 202}).json()["id"]
        finished(api, sandbox, run_id)
        before = all_logs(api, sandbox, run_id)
        resumed = api.post(org_path(sandbox, "/agent/run/resume"), json={"agent_run_id": run_id, "prompt": "More"})
        assert resumed.status_code == 200 and resumed.json()["status"] == "ACTIVE"
        after = all_logs(api, sandbox, run_id)
        assert after[: len(before)] == before
        assert after[len(before)]["message_type"] == "USER_MESSAGE" and after[len(before)]["observation"] == "More"
        run = finished(api, sandbox, run_id)
        assert run["status"] == "COMPLETE" and len(run["github_pull_requests"]) == 1  # still the same PR
        final = all_logs(api, sandbox, run_id)
        users = [e for e in final if e["message_type"] == "USER_MESSAGE"]
        assert len(users) == len([e for e in before if e["message_type"] == "USER_MESSAGE"]) + 1
        missing = api.post(org_path(sandbox, "/agent/run/resume"), json={"agent_run_id": 987654, "prompt": "x"})
    assert missing.status_code == 404
    assert missing.json() == {"message": "Agent run 987654 not found", "status_code": 404}


def test_seeded_runs(api: httpx2.Client, sandbox: SandboxServer) -> None:
    runs = api.get(org_path(sandbox, "/agent/runs")).json()["items"]
    assert [run["id"] for run in runs] == sorted((run["id"] for run in runs), reverse=True)  # newest first
    by_id = {run["id"]: run for run in runs}
    assert {by_id[401]["status"], by_id[404]["status"], by_id[408]["status"]} == {"COMPLETE", "ERROR", "STOPPED"}
    assert " " in by_id[401]["created_at"] and by_id[402]["created_at"].endswith("Z")  # both formats seen live
    assert by_id[401]["github_pull_requests"][0]["id"] == 301 and by_id[405]["github_pull_requests"] == []
    long = api.get(org_path(sandbox, "/agent/run/409/logs")).json()
    assert long["total_logs"] == 250 and long["pages"] == 3
    observations = [e["observation"] for e in all_logs(api, sandbox, 401)]
    assert any(isinstance(o, str) for o in observations) and any(isinstance(o, dict) for o in observations)
    mine = api.get(org_path(sandbox, "/agent/runs"), params={"user_id": 101, "source_type": "API"}).json()
    assert mine["items"] and all(run["source_type"] == "API" for run in mine["items"])
    assert 402 not in {run["id"] for run in mine["items"]}  # someone else's run


def test_logs_pages_are_chronological_or_reversed_and_end_short(api: httpx2.Client, sandbox: SandboxServer) -> None:
    path = org_path(sandbox, "/agent/run/409/logs")
    pages = [api.get(path, params={"skip": skip, "limit": 100}).json() for skip in (0, 100, 200)]
    assert [len(p["logs"]) for p in pages] == [100, 100, 50]
    assert [(p["page"], p["size"], p["pages"], p["total_logs"]) for p in pages] == [(1, 100, 3, 250), (2, 100, 3, 250),
                                                                                  (3, 100, 3, 250)]
    forward = [e for p in pages for e in p["logs"]]
    backward = [e for skip in (0, 100, 200)
                for e in api.get(path, params={"skip": skip, "limit": 100, "reverse": "true"}).json()["logs"]]
    assert backward == forward[::-1]
    assert api.get(path, params={"skip": 1000}).json()["logs"] == []


def test_both_logs_paths_serve_the_same_page(api: httpx2.Client, sandbox: SandboxServer) -> None:
    contract = api.get(org_path(sandbox, "/agent/run/401/logs"), params={"limit": 7})
    alpha = api.get(f"/v1/alpha/organizations/{sandbox.org_id}/agent/run/401/logs", params={"limit": 7})
    assert contract.status_code == alpha.status_code == 200 and contract.json() == alpha.json()


@pytest.mark.parametrize(("mode", "served", "missing"), [
    ("alpha", "/v1/alpha/organizations/1/agent/run/{}/logs", "/v1/organizations/1/agent/run/{}/logs"),
    ("contract", "/v1/organizations/1/agent/run/{}/logs", "/v1/alpha/organizations/1/agent/run/{}/logs"),
])
def test_one_logs_path_only(make_sandbox: MakeSandbox, mode: str, served: str, missing: str) -> None:
    sandbox = make_sandbox(logs_paths=mode)
    with client_for(sandbox) as api:
        assert api.get(served.format(401)).status_code == 200
        route_missing = api.get(missing.format(401))
        run_missing = api.get(served.format(987654))
    assert route_missing.status_code == 404 and route_missing.json() == {"detail": "Not Found"}
    assert run_missing.status_code == 404
    assert run_missing.json() == {"message": "Agent run 987654 not found", "status_code": 404}


def test_setup_commands_and_log_analysis_start_runs(api: httpx2.Client, sandbox: SandboxServer) -> None:
    setup = api.post(org_path(sandbox, "/setup-commands/generate"), json={"repo_id": 202}).json()
    assert setup["status"] == "ACTIVE" and setup["url"].endswith(f"/agent/trace/{setup['agent_run_id']}")
    run = api.get(org_path(sandbox, f"/agent/run/{setup['agent_run_id']}")).json()
    assert run["source_type"] == "SETUP_COMMANDS"
    analysis = api.post(org_path(sandbox, "/sandbox/601/analyze-logs"))
    assert analysis.status_code == 200 and analysis.json()["status"] == "ACTIVE"
    no_logs = api.post(org_path(sandbox, "/sandbox/602/analyze-logs"))
    assert no_logs.status_code == 400 and no_logs.json()["message"] == "No logs available for sandbox 602"
    assert api.post(org_path(sandbox, "/sandbox/999/analyze-logs")).status_code == 404
    assert api.post(org_path(sandbox, "/setup-commands/generate"), json={"repo_id": 999}).status_code == 404
    assert api.post(org_path(sandbox, "/setup-commands/generate"), json={"repo_id": 204}).status_code == 400


def test_create_checks_the_quota_and_the_repository(make_sandbox: MakeSandbox) -> None:
    sandbox = make_sandbox(max_runs=1)
    with client_for(sandbox) as api:
        assert api.post(org_path(sandbox, "/agent/run"), json={"prompt": "x", "repo_id": 999}).status_code == 404
        assert api.post(org_path(sandbox, "/agent/run"), json={"prompt": "x"}).status_code == 200
        quota = api.post(org_path(sandbox, "/agent/run"), json={"prompt": "y"})
    assert quota.status_code == 402 and quota.json()["status_code"] == 402
    assert quota.json()["message"].startswith("Alloted agent runs")
