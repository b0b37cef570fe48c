"""The contract's state table: ban/unban/remove-from-PR, edit PR, revoke OAuth tokens, check-suite settings,
and the webhook (recorded, never called)."""

from __future__ import annotations

import socket
from typing import Any

import httpx2
import pytest

from agent_automation_mcp.sandbox import SandboxServer

from .conftest import MakeSandbox, client_for, org_path


def pr_states(sandbox: SandboxServer) -> dict[int, dict[str, Any]]:
    return {pr["id"]: pr for pr in httpx2.get(f"{sandbox.url}/_sandbox/state/prs").json()}


def fixture_run(sandbox: SandboxServer, **spec: Any) -> dict[str, Any]:
    response = httpx2.post(f"{sandbox.url}/_sandbox/runs", json=spec)
    response.raise_for_status()
    return response.json()


def status(api: httpx2.Client, sandbox: SandboxServer, run_id: int) -> str:
    return api.get(org_path(sandbox, f"/agent/run/{run_id}")).json()["status"]


@pytest.mark.parametrize("operation", ["ban", "remove-from-pr"])
def test_ban_flags_the_pr_and_stops_every_current_agent_on_it(make_sandbox: MakeSandbox, operation: str) -> None:
    sandbox = make_sandbox(run_seconds=60)
    with client_for(sandbox) as api:
        helper = fixture_run(sandbox, status="ACTIVE", pull_request_id=301, source_type="GITHUB_CHECK_SUITE")
        elsewhere = fixture_run(sandbox, status="ACTIVE", pull_request_id=306)
        assert pr_states(sandbox)[301]["run_ids"] == [401, helper["id"]]
        response = api.post(org_path(sandbox, f"/agent/run/{operation}"), json={"agent_run_id": 401})
        assert response.status_code == 200
        assert response.json()["stopped_agent_run_ids"] == [helper["id"]]
        assert status(api, sandbox, helper["id"]) == "STOPPED"
        assert status(api, sandbox, elsewhere["id"]) == "ACTIVE"
        assert status(api, sandbox, 401) == "COMPLETE"  # finished runs stay as they were
    pr = pr_states(sandbox)[301]
    assert pr["banned"] and pr["url_ban"] and pr["parent_run_ban"] == 401
    assert not pr_states(sandbox)[306]["banned"]


def test_ban_stops_the_run_itself_when_it_is_active(make_sandbox: MakeSandbox) -> None:
    sandbox = make_sandbox(run_seconds=60)
    with client_for(sandbox) as api:
        run_id = api.post(org_path(sandbox, "/agent/run"), json={"prompt": "x", "repo_id": 201}).json()["id"]
        response = api.post(org_path(sandbox, "/agent/run/ban"), json={"agent_run_id": run_id}).json()
        assert response["stopped_agent_run_ids"] == [run_id]
        assert status(api, sandbox, run_id) == "STOPPED"
        logs = api.get(org_path(sandbox, f"/agent/run/{run_id}/logs")).json()
        assert logs["status"] == "STOPPED"


def test_unban_removes_url_and_parent_run_bans(api: httpx2.Client, sandbox: SandboxServer) -> None:
    before = pr_states(sandbox)
    assert before[302]["url_ban"] and before[302]["parent_run_ban"] is None
    assert before[303]["parent_run_ban"] == 403 and not before[303]["url_ban"]
    for run_id in (402, 403):
        response = api.post(org_path(sandbox, "/agent/run/unban"), json={"agent_run_id": run_id})
        assert response.status_code == 200 and response.json()["success"] is True
    after = pr_states(sandbox)
    assert not after[302]["banned"] and not after[303]["banned"]
    api.post(org_path(sandbox, "/agent/run/ban"), json={"agent_run_id": 402})
    assert pr_states(sandbox)[302]["banned"]
    api.post(org_path(sandbox, "/agent/run/unban"), json={"agent_run_id": 402})
    assert not pr_states(sandbox)[302]["banned"]


def test_edit_pr_moves_between_the_four_states(api: httpx2.Client, sandbox: SandboxServer) -> None:
    for state in ("draft", "ready_for_review", "closed", "open"):
        simple = api.patch(org_path(sandbox, "/prs/301"), json={"state": state}).json()
        assert simple == {"success": True, "url": "https://github.com/sandbox-org/web-app/pull/1", "number": 1,
                          "title": simple["title"], "state": state, "error": None}
        assert pr_states(sandbox)[301]["state"] == state
    restful = api.patch(org_path(sandbox, "/repos/201/prs/301"), json={"state": "closed"})
    assert restful.json()["state"] == "closed" and pr_states(sandbox)[301]["state"] == "closed"
    assert api.patch(org_path(sandbox, "/repos/202/prs/301"), json={"state": "open"}).status_code == 404
    assert api.patch(org_path(sandbox, "/prs/999999"), json={"state": "open"}).status_code == 404


def test_edit_pr_needs_write_permission_and_cannot_change_a_merged_pr(api: httpx2.Client,
                                                                      sandbox: SandboxServer) -> None:
    denied = api.patch(org_path(sandbox, "/prs/305"), json={"state": "closed"})
    assert denied.status_code == 403
    assert denied.json() == {"message": "You do not have write permission on the repository sandbox-org/infra",
                             "status_code": 403}
    assert pr_states(sandbox)[305]["state"] == "open"
    merged = api.patch(org_path(sandbox, "/prs/304"), json={"state": "open"})
    assert merged.status_code == 200 and merged.json()["success"] is False and merged.json()["error"]
    invalid = api.patch(org_path(sandbox, "/prs/301"), json={"state": "merged"})
    assert invalid.status_code == 422 and invalid.json()["detail"][0]["loc"] == ["body", "state"]


def test_revoke_deactivates_all_the_callers_tokens_of_that_provider_in_that_org(make_sandbox: MakeSandbox) -> None:
    sandbox = make_sandbox(tokens=("tok-a", "tok-b"), visible_orgs=2)

    def tokens(token: str, org_id: int) -> list[dict[str, Any]]:
        with client_for(sandbox, token) as api:
            return api.get("/v1/oauth/tokens/status", params={"org_id": org_id}).json()

    assert [t["is_active"] for t in tokens("tok-a", 1) if t["provider"] == "github"] == [True, True]
    with client_for(sandbox, "tok-a") as api:
        revoked = api.post("/v1/oauth/tokens/revoke", params={"provider": "github", "org_id": 1})
    assert revoked.status_code == 200 and revoked.json()["revoked"] == 2
    after = tokens("tok-a", 1)
    assert [t["is_active"] for t in after if t["provider"] == "github"] == [False, False]
    assert all(t["is_active"] for t in after if t["provider"] != "github")
    assert all(t["is_active"] for t in tokens("tok-b", 1))  # another user's tokens
    assert all(t["is_active"] for t in tokens("tok-a", 2))  # another organisation


def test_check_suite_settings_update_partially_within_bounds(api: httpx2.Client, sandbox: SandboxServer) -> None:
    path = org_path(sandbox, "/repos/check-suite-settings")
    initial = api.get(path, params={"repo_id": 201}).json()
    assert initial["check_retry_count"] == 3 and "lint" in initial["available_check_suite_names"]
    updated = api.put(path, params={"repo_id": 201}, json={"ignored_checks": ["lint"],
                                                          "custom_prompts": {"e2e": "Retry once"}}).json()
    assert updated["ignored_checks"] == ["lint"] and updated["check_retry_count"] == 3
    updated = api.put(path, params={"repo_id": 201}, json={"check_retry_count": 10, "ignored_checks": None}).json()
    assert updated["check_retry_count"] == 10 and updated["ignored_checks"] == ["lint"]
    assert updated["custom_prompts"] == {"e2e": "Retry once"}
    assert api.get(path, params={"repo_id": 201}).json() == {**updated}
    assert api.get(path, params={"repo_id": 202}).json() == initial  # other repositories are untouched
    for bad in (11, -1, "many"):
        refused = api.put(path, params={"repo_id": 201}, json={"check_retry_count": bad})
        assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "check_retry_count"]
    missing = api.get(path)
    assert missing.status_code == 422 and missing.json()["detail"][0]["loc"] == ["query", "repo_id"]
    assert api.get(path, params={"repo_id": 201}).json()["check_retry_count"] == 10


def test_webhook_config_and_test_never_touch_the_network(make_sandbox: MakeSandbox) -> None:
    sandbox = make_sandbox(run_seconds=0.1)
    with socket.create_server(("127.0.0.1", 0)) as listener, client_for(sandbox) as api:
        listener.setblocking(False)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
        path = org_path(sandbox, "/webhooks/agent-run")
        assert api.get(path).json() == {"url": None, "enabled": False, "has_secret": False}
        assert api.post(path, json={"url": url, "secret": "hush"}).status_code == 200
        assert api.get(path).json() == {"url": url, "enabled": True, "has_secret": True}
        tested = api.post(f"{path}/test", json={"url": url})
        assert tested.status_code == 200 and tested.json()["success"] is True
        run_id = api.post(org_path(sandbox, "/agent/run"), json={"prompt": "x"}).json()["id"]
        api.get(org_path(sandbox, f"/agent/run/{run_id}"))
        assert api.post(path, json={"url": "not a url"}).status_code == 422
        assert api.post(path, json={"url": "https://e.com/" + "a" * 2083}).status_code == 422
        assert api.delete(path).status_code == 200
        assert api.get(path).json() == {"url": None, "enabled": False, "has_secret": False}
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody called
    recorded = httpx2.get(f"{sandbox.url}/_sandbox/state/webhook-tests").json()
    assert [r["url"] for r in recorded] == [url]
