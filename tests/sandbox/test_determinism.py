"""The same seed gives the same world, the same traces and the same outcomes."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from agent_automation_mcp.api.statuses import FAILURES
from agent_automation_mcp.sandbox import SandboxConfig, create_app, ids, views
from agent_automation_mcp.sandbox.seed import RECENT_GOING_SECONDS, RECENT_HOURS, RECENT_SOURCES
from agent_automation_mcp.sandbox.world import World

from .conftest import MakeSandbox, client_for, org_path


def snapshot(world: World) -> dict[str, Any]:
    return {
        "orgs": [views.organization(org) for org in world.orgs.values()],
        "users": [views.user(user) for user in world.users.values()],
        "repos": [views.repository(repo) for repo in world.repos.values()],
        "prs": [views.pull_request_state(world, pr) for pr in world.prs.values()],
        "runs": [views.agent_run(world, run) for run in world.runs.values()],
        "logs": {run.id: run.logs for run in world.runs.values()},
    }


def world_of(seed: int) -> World:
    return create_app(SandboxConfig(seed=seed)).state.world


def test_the_same_seed_builds_the_same_world() -> None:
    assert snapshot(world_of(3)) == snapshot(world_of(3))


def test_another_seed_changes_the_content_but_not_the_ids() -> None:
    first, second = snapshot(world_of(3)), snapshot(world_of(4))
    assert first != second
    for key in ("orgs", "users", "repos", "prs", "runs"):
        assert [item["id"] for item in first[key]] == [item["id"] for item in second[key]]


def test_the_documented_facts_hold_for_any_seed() -> None:
    for seed in (0, 1, 99):
        world = world_of(seed)
        demo = world.users[ids.DEMO_USER_ID]
        assert world.token_users["sandbox-demo-token"] == demo.id
        assert demo.id in world.repos[ids.WRITABLE_REPO_ID].writer_ids
        assert demo.id not in world.repos[ids.READ_ONLY_REPO_ID].writer_ids
        assert world.repos[ids.ARCHIVED_REPO_ID].archived
        assert world.prs[ids.READ_ONLY_PR_ID].repo_id == ids.READ_ONLY_REPO_ID
        assert world.prs[ids.MERGED_PR_ID].merged
        assert world.prs[ids.URL_BANNED_PR_ID].url_ban
        assert world.prs[ids.PARENT_RUN_BANNED_PR_ID].parent_run_ban == ids.PARENT_RUN_BANNED_RUN_ID
        assert world.prs[ids.DRAFT_PR_ID].state == "draft"
        assert world.runs[ids.RUN_WITH_PR_ID].pull_request_ids == [ids.PR_ID]
        assert world.runs[ids.ERROR_RUN_ID].status == "ERROR"
        assert world.runs[ids.STOPPED_RUN_ID].status == "STOPPED"
        assert world.runs[ids.RUN_WITHOUT_PR_ID].pull_request_ids == []
        assert len(world.runs[ids.LONG_RUN_ID].logs) == 250
        assert world.sandboxes[ids.SANDBOX_WITH_LOGS].has_logs
        assert not world.sandboxes[ids.SANDBOX_WITHOUT_LOGS].has_logs
        assert max(world.runs) < ids.FIRST_NEW_RUN_ID and max(world.prs) < ids.FIRST_NEW_PR_ID


def test_new_runs_get_the_same_trace_and_outcome(make_sandbox: MakeSandbox) -> None:
    traces = []
    for _ in range(2):
        sandbox = make_sandbox(seed=8, run_seconds=0.2, run_error_fraction=0.5)
        with client_for(sandbox) as api:
            ids = [api.post(org_path(sandbox, "/agent/run"), json={"prompt": f"task {i}"}).json()["id"]
                   for i in range(4)]
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and any(
                    api.get(org_path(sandbox, f"/agent/run/{i}")).json()["status"] == "ACTIVE" for i in ids):
                time.sleep(0.02)
            runs = [api.get(org_path(sandbox, f"/agent/run/{i}")).json() for i in ids]
            logs = [api.get(org_path(sandbox, f"/agent/run/{i}/logs")).json()["logs"] for i in ids]
        traces.append(([(r["id"], r["status"], r["result"]) for r in runs],
                       [[{k: v for k, v in e.items() if k != "created_at"} for e in log] for log in logs]))
    assert traces[0] == traces[1]
    assert {status for _, status, _ in traces[0][0]} <= {"COMPLETE", "ERROR"}


def test_every_token_has_a_user_of_its_own_however_many_tokens() -> None:
    """Past ten tokens the users would meet the seeded members' ids (111..) and take over their runs."""
    tokens = tuple(f"token-{i}" for i in range(1200))
    world = create_app(SandboxConfig(tokens=tokens)).state.world
    users = [world.token_users[token] for token in tokens]
    assert len(set(users)) == len(tokens)
    assert all(world.users[user].github_username.startswith("sandbox-") for user in users)
    assert users[:2] == [ids.DEMO_USER_ID, ids.DEMO_USER_ID + 1]


def test_a_days_runs_are_spread_over_the_day_before_the_start_in_every_ending() -> None:
    """`recent_runs`: newest first by id is newest first by time, the last hour's still go on, the rest ended in each
    way; the same seed draws the same day, and the seeded world beside it is unchanged."""
    started = time.time()
    world = create_app(SandboxConfig(seed=5, recent_runs=96)).state.world
    again = create_app(SandboxConfig(seed=5, recent_runs=96)).state.world
    day = [run for run in world.runs.values() if run.id >= ids.FIRST_NEW_RUN_ID]
    ages = [started - datetime.fromisoformat(run.created_at.replace(" ", "T").removesuffix("Z") + "+00:00")
            .timestamp() for run in day]
    assert [run.id for run in day] == list(range(ids.FIRST_NEW_RUN_ID, ids.FIRST_NEW_RUN_ID + 96))
    assert ages == sorted(ages, reverse=True) and ages[-1] > 0 and ages[0] < RECENT_HOURS * 3600
    assert all(hour in {int(age // 3600) for age in ages} for hour in range(RECENT_HOURS))  # every hour has runs
    going = {run.id for run, age in zip(day, ages, strict=True) if age < RECENT_GOING_SECONDS}
    assert going and {run.id for run in day if run.status == "ACTIVE"} == going
    ended = {run.status for run in day if run.id not in going}
    assert ended >= {"COMPLETE", "ERROR", "STOPPED", "PAUSED"} and ended & FAILURES - {"ERROR"}
    assert {run.source_type for run in day} == set(RECENT_SOURCES)
    assert {run.repo_id for run in day} >= {None, ids.WRITABLE_REPO_ID} and ids.ARCHIVED_REPO_ID not in {
        run.repo_id for run in day}
    assert any(run.pull_request_ids for run in day if run.status == "COMPLETE")
    assert [(run.id, run.status, run.source_type, run.repo_id) for run in day] == [
        (run.id, run.status, run.source_type, run.repo_id) for run in again.runs.values()
        if run.id >= ids.FIRST_NEW_RUN_ID]
    seeded = snapshot(world_of(5))
    assert [run for run in snapshot(world)["runs"] if run["id"] < ids.FIRST_NEW_RUN_ID] == seeded["runs"]
