"""Fault switches: 500s, 429s, redirects, dropped connections, broken or empty bodies, latency; per operation;
seeded; mutable at runtime."""

from __future__ import annotations

import json
import time

import httpx2
import pytest

from agent_automation_mcp.sandbox import Faults, SandboxServer

from .conftest import MakeSandbox, client_for, org_path


def put_faults(sandbox: SandboxServer, **faults: object) -> httpx2.Response:
    return httpx2.put(f"{sandbox.url}/_sandbox/faults", json=faults)


def run_count(api: httpx2.Client, sandbox: SandboxServer) -> int:
    return api.get(org_path(sandbox, "/agent/runs")).json()["total"]


def test_faults_are_off_by_default(api: httpx2.Client, sandbox: SandboxServer) -> None:
    assert not sandbox.faults.active and sandbox.faults == Faults()
    assert {api.get("/v1/users/me").status_code for _ in range(30)} == {200}
    assert {record.fault for record in sandbox.request_log} == {None}


def test_error_rate_answers_500_without_handling(api: httpx2.Client, sandbox: SandboxServer) -> None:
    before = run_count(api, sandbox)
    sandbox.faults.error_rate = 1.0
    response = api.post(org_path(sandbox, "/agent/run"), json={"prompt": "x"})
    sandbox.faults.error_rate = 0.0
    assert response.status_code == 500
    assert response.json() == {"message": "Internal server error (sandbox fault)", "status_code": 500}
    assert run_count(api, sandbox) == before
    assert [r.fault for r in sandbox.state.requests_for("create_agent_run")] == ["error"]


def test_a_dropped_connection_loses_the_answer_but_not_the_effect(api: httpx2.Client, sandbox: SandboxServer) -> None:
    before = run_count(api, sandbox)
    assert put_faults(sandbox, drop_rate=1.0, operations=["create_agent_run"]).status_code == 200
    with pytest.raises(httpx2.RemoteProtocolError):
        api.post(org_path(sandbox, "/agent/run"), json={"prompt": "x"})
    assert api.get("/v1/users/me").status_code == 200  # other operations are unaffected
    put_faults(sandbox)
    assert run_count(api, sandbox) == before + 1  # the request took effect: a client must not resend blindly
    [record] = sandbox.state.requests_for("create_agent_run")
    assert (record.status, record.fault) == (None, "drop")


@pytest.mark.parametrize(("fault", "status", "handled"), [
    ("throttle_rate", 429, False), ("redirect_rate", 307, False), ("empty_rate", 202, True)])
def test_throttles_redirects_and_empty_answers(api: httpx2.Client, sandbox: SandboxServer, fault: str, status: int,
                                               handled: bool) -> None:
    before = run_count(api, sandbox)
    put_faults(sandbox, **{fault: 1.0}, operations=["create_agent_run"])
    response = api.post(org_path(sandbox, "/agent/run"), json={"prompt": "x"})
    put_faults(sandbox)
    assert response.status_code == status
    assert run_count(api, sandbox) == before + handled
    if status == 429:
        assert response.headers["Retry-After"] == "0"
    if status == 307:
        assert response.headers["Location"].startswith("https://moved.invalid/v1/organizations/")
    if status == 202:
        assert response.content == b""


def test_malformed_bodies_are_200_and_not_json(api: httpx2.Client, sandbox: SandboxServer) -> None:
    sandbox.faults.malformed_rate = 1.0
    response = api.get(org_path(sandbox, "/agent/run/401"))
    missing = api.get(org_path(sandbox, "/agent/run/987654"))
    sandbox.faults.malformed_rate = 0.0
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.content)
    assert missing.status_code == 404 and missing.json()["status_code"] == 404  # errors stay intact


def test_throttle_answers_429_with_the_chosen_retry_after(api: httpx2.Client, sandbox: SandboxServer) -> None:
    put_faults(sandbox, throttle_rate=1.0, throttle_retry_after=99999, operations=["get_agent_run"])
    refused = api.get(org_path(sandbox, "/agent/run/401"))
    assert api.get("/v1/users/me").status_code == 200  # other operations are unaffected
    put_faults(sandbox, throttle_rate=1.0, throttle_retry_after=None, operations=["get_agent_run"])
    bare = api.get(org_path(sandbox, "/agent/run/401"))
    put_faults(sandbox)
    assert (refused.status_code, refused.headers["retry-after"]) == (429, "99999")
    assert bare.status_code == 429 and "retry-after" not in bare.headers
    assert [r.fault for r in sandbox.state.requests_for("get_agent_run")] == ["throttle"] * 2


def test_latency_delays_only_the_chosen_operations(api: httpx2.Client, sandbox: SandboxServer) -> None:
    put_faults(sandbox, latency=0.15, operations=["get_agent_run"])
    started = time.monotonic()
    assert api.get(org_path(sandbox, "/agent/run/401")).status_code == 200
    assert time.monotonic() - started >= 0.15  # a lower bound only: sleeping never takes less
    assert sandbox.faults.latency == 0.15 and sandbox.faults.operations == frozenset({"get_agent_run"})


def test_the_fault_control_validates_and_reports(sandbox: SandboxServer) -> None:
    assert put_faults(sandbox, error_rate=2).status_code == 400
    assert put_faults(sandbox, nonsense=1).status_code == 400
    assert httpx2.put(f"{sandbox.url}/_sandbox/faults", content=b"{").status_code == 400
    current = put_faults(sandbox, error_rate=0.25, operations=["get_user"]).json()
    assert current == {"latency": 0.0, "error_rate": 0.25, "drop_rate": 0.0, "malformed_rate": 0.0,
                       "throttle_rate": 0.0, "redirect_rate": 0.0, "empty_rate": 0.0, "throttle_retry_after": 0.0,
                       "operations": ["get_user"]}
    assert put_faults(sandbox, throttle_retry_after=-1).status_code == 400
    assert httpx2.get(f"{sandbox.url}/_sandbox/faults").json() == current
    with pytest.raises(ValueError):
        Faults(drop_rate=-0.1)


def test_fault_dice_are_seeded(make_sandbox: MakeSandbox) -> None:
    outcomes = []
    for _ in range(2):
        sandbox = make_sandbox(seed=42, faults=Faults(error_rate=0.5))
        with client_for(sandbox) as api:
            outcomes.append([api.get("/v1/users/me").status_code for _ in range(20)])
    assert outcomes[0] == outcomes[1] and {200, 500} == set(outcomes[0])
