"""Authentication, organisation access, unknown routes and methods, 422 shapes and paging envelopes."""

from __future__ import annotations

import hashlib

import httpx2
import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route

from agent_automation_mcp.api.operations import OPERATIONS
from agent_automation_mcp.sandbox import SandboxServer
from agent_automation_mcp.sandbox.routes import in_matching_order

from .conftest import MakeSandbox, client_for, org_path

NO_ACCESS = {"message": "You do not have access to this organization", "status_code": 403}


def concrete(path: str) -> str:
    return path.format(org_id=1, user_id=101, agent_run_id=401, pr_id=301, repo_id=201, sandbox_id=601)


@pytest.mark.parametrize("token", [None, "not-a-token", "Basic c2FuZGJveA=="])
def test_every_operation_needs_a_known_bearer_token(sandbox: SandboxServer, token: str | None) -> None:
    headers = {} if token is None else {"Authorization": token if token.startswith("Basic") else f"Bearer {token}"}
    with httpx2.Client(base_url=sandbox.url, headers=headers) as client:
        for op in OPERATIONS.values():
            response = client.request(op.method, concrete(op.path))
            assert response.status_code == 401, op.name
            assert response.json() == {"detail": "Invalid or missing API token"}
    assert all(record.status == 401 for record in sandbox.request_log)


def test_an_organisation_the_token_cannot_access_is_403(api: httpx2.Client, sandbox: SandboxServer) -> None:
    forbidden = sandbox.config.forbidden_org_id
    for suffix in ("/users", "/repos", "/agent/runs", "/agent/run/1401", "/integrations", "/cli/rules"):
        response = api.get(org_path(sandbox, suffix, org_id=forbidden))
        assert (response.status_code, response.json()) == (403, NO_ACCESS), suffix
    assert api.get(org_path(sandbox, "/users", org_id=777)).json() == NO_ACCESS  # no such organisation
    status = api.get("/v1/oauth/tokens/status", params={"org_id": forbidden})
    assert (status.status_code, status.json()) == (403, NO_ACCESS)
    orgs = api.get("/v1/organizations").json()
    assert [org["id"] for org in orgs["items"]] == [sandbox.org_id]


def test_visible_organisations_and_several_tokens(make_sandbox: MakeSandbox) -> None:
    sandbox = make_sandbox(tokens=("alice", "bob"), org_id=40, visible_orgs=3)
    for token, user_id in (("alice", 101), ("bob", 102)):
        with client_for(sandbox, token) as api:
            assert api.get("/v1/users/me").json()["id"] == user_id
            assert [o["id"] for o in api.get("/v1/organizations").json()["items"]] == [40, 41, 42]
            assert api.get("/v1/organizations/42/repos").status_code == 200
            assert api.get("/v1/organizations/43/repos").json() == NO_ACCESS
            members = {u["id"] for u in api.get("/v1/organizations/41/users").json()["items"]}
            assert {101, 102} <= members


def test_one_person_may_hold_several_tokens(make_sandbox: MakeSandbox) -> None:
    sandbox = make_sandbox(tokens=("alice", "bob", "alice-ci"), token_orgs={"alice": (1,)},
                           token_owners={"alice-ci": "alice"}, visible_orgs=2)
    for token, user_id in (("alice", 101), ("alice-ci", 101), ("bob", 102)):
        with client_for(sandbox, token) as api:
            assert api.get("/v1/users/me").json()["id"] == user_id
    with client_for(sandbox, "alice-ci") as api:  # her organisations, whichever of her tokens
        assert [o["id"] for o in api.get("/v1/organizations").json()["items"]] == [1]
        members = [u["id"] for u in api.get("/v1/organizations/1/users").json()["items"]]
        assert members.count(101) == 1
    for owners in ({"alice": "alice-ci"}, {"alice-ci": "carol"}, {"bob": "alice", "alice-ci": "bob"}):
        with pytest.raises(ValueError, match=r"token_owners|owns none"):
            make_sandbox(tokens=("alice", "bob", "alice-ci"), token_owners=owners)


def test_unknown_routes_and_wrong_methods_answer_like_fastapi(api: httpx2.Client, sandbox: SandboxServer) -> None:
    missing = api.get("/v1/nothing-here")
    assert (missing.status_code, missing.json()) == (404, {"detail": "Not Found"})
    wrong = api.delete(org_path(sandbox, "/agent/run/401"))
    assert (wrong.status_code, wrong.json()) == (405, {"detail": "Method Not Allowed"})
    # Like FastAPI, `GET .../agent/run/resume` is the get-run route with a run id that is not an integer.
    shadowed = api.get(org_path(sandbox, "/agent/run/resume"))
    assert shadowed.status_code == 422 and shadowed.json()["detail"][0]["loc"] == ["path", "agent_run_id"]
    assert [r.operation for r in sandbox.request_log] == [None, None, "get_agent_run"]


def test_422_lists_every_problem_with_its_location(api: httpx2.Client, sandbox: SandboxServer) -> None:
    response = api.post(org_path(sandbox, "/agent/run"), json={"repo_id": "x", "agent_type": "robot"})
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert [(d["loc"], d["type"]) for d in detail] == [(["body", "prompt"], "missing"),
                                                        (["body", "repo_id"], "int_parsing"),
                                                        (["body", "agent_type"], "literal_error")]
    assert all(isinstance(d["msg"], str) and d["msg"] for d in detail)
    paging = api.get(org_path(sandbox, "/users", org_id="one"), params={"skip": -1, "limit": 101}).json()["detail"]
    assert [d["loc"] for d in paging] == [["path", "org_id"], ["query", "skip"], ["query", "limit"]]
    broken = api.post(org_path(sandbox, "/agent/run"), content=b"{nope", headers={"Content-Type": "application/json"})
    assert broken.status_code == 422 and broken.json()["detail"][0]["type"] == "json_invalid"
    empty = api.post(org_path(sandbox, "/agent/run/ban"))
    assert empty.json() == {"detail": [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}]}


def test_paging_envelopes(api: httpx2.Client, sandbox: SandboxServer) -> None:
    first = api.get(org_path(sandbox, "/users"), params={"limit": 3}).json()
    assert (first["total"], first["page"], first["size"], first["pages"], len(first["items"])) == (7, 1, 3, 3, 3)
    last = api.get(org_path(sandbox, "/users"), params={"limit": 3, "skip": 6}).json()
    assert (last["page"], len(last["items"])) == (3, 1)
    everyone = api.get(org_path(sandbox, "/users")).json()["items"]
    assert [u["id"] for u in first["items"] + api.get(org_path(sandbox, "/users"), params={
        "limit": 3, "skip": 3}).json()["items"] + last["items"]] == [u["id"] for u in everyone]
    repos = api.get(org_path(sandbox, "/repos"), params={"skip": 10}).json()
    assert repos["items"] == [] and repos["total"] == 5
    me = api.get(org_path(sandbox, "/users/101")).json()
    assert me == api.get("/v1/users/me").json()
    assert api.get(org_path(sandbox, "/users/4242")).json() == {"message": "User 4242 not found", "status_code": 404}


def test_the_request_log_names_tokens_only_by_hash(api: httpx2.Client, sandbox: SandboxServer) -> None:
    api.get("/v1/users/me")
    log = httpx2.get(f"{sandbox.url}/_sandbox/requests")
    assert sandbox.token not in log.text
    [record] = log.json()
    assert record["token_hash"] == hashlib.sha256(sandbox.token.encode()).hexdigest()[:16]
    assert (record["operation"], record["status"], record["method"]) == ("get_current_user", 200, "GET")


def test_a_literal_segment_is_matched_before_a_path_parameter_whatever_the_tables_order() -> None:
    """A new `GET .../repos/{repo_id}` listed first must not swallow `.../repos/check-suite-settings`."""

    async def endpoint(request: Request) -> Response:
        raise AssertionError("never called")

    table_order = [Route("/v1/organizations/{org_id}/repos/{repo_id}", endpoint, name="get_repository"),
                   Route("/v1/organizations/{org_id}/repos/check-suite-settings", endpoint,
                         name="get_check_suite_settings")]
    ordered = in_matching_order(table_order)

    def served_by(path: str) -> str:  # Starlette's rule: the first route that fully matches serves
        scope = {"type": "http", "method": "GET", "path": path, "root_path": ""}
        return next(route.name for route in ordered if route.matches(scope)[0] == Match.FULL)

    assert served_by("/v1/organizations/1/repos/check-suite-settings") == "get_check_suite_settings"
    assert served_by("/v1/organizations/1/repos/201") == "get_repository"
