"""The tenants of the remote benchmark: a token each, runs of their own, what they call, and the token check.

The check is what makes a leak visible: each tenant names only its own runs (in the path) and its own user (in
the query), so the sandbox's request log, which pairs a hash of each request's token with its path, shows any
request that reached the service under another tenant's token.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

import httpx2
from http_load import Call, Tenant

from agent_automation_mcp.sandbox import SandboxServer
from agent_automation_mcp.sandbox.state import RequestRecord, token_hash

ORG_ID = 1
# The sandbox gives its tokens the users 101, 102, ... in order, and its seeded members the users 111-116, who own
# some seeded runs (sandbox/world.py): tokens that would get those ids are placeholders no tenant uses. The first
# token is no tenant's either: the other seeded runs belong to its user, and in env-auth mode the replicas use it.
FIRST_TOKEN_USER_ID = 101
SEEDED_MEMBER_IDS = range(111, 117)


@dataclass(frozen=True)
class TenantFixture:
    token: str
    user_id: int
    run_ids: tuple[int, int]  # a run to read, and a run whose trace to read


def lay_out_tokens(tenants: int) -> tuple[tuple[str, ...], dict[str, int]]:
    """Every token of the sandbox in order (the replicas' own first), and each tenant's token with its user id."""
    tokens = [f"replicas-{secrets.token_hex(12)}"]
    users: dict[str, int] = {}
    while len(users) < tenants:
        user_id = FIRST_TOKEN_USER_ID + len(tokens)
        token = f"tenant-{len(users):03d}-{secrets.token_hex(12)}"
        if user_id in SEEDED_MEMBER_IDS:
            token = f"placeholder-{user_id}"
        else:
            users[token] = user_id
        tokens.append(token)
    return tuple(tokens), users


def create_fixtures(sandbox: SandboxServer, users: dict[str, int]) -> list[TenantFixture]:
    """Two runs of each tenant's own, created through the sandbox's control endpoint."""
    fixtures = []
    with httpx2.Client(base_url=sandbox.url, timeout=10) as http:
        for token, user_id in users.items():
            run_ids = []
            for entries in (5, 40):
                response = http.post("/_sandbox/runs", json={"log_entries": entries, "user_id": user_id})
                response.raise_for_status()
                run_ids.append(int(response.json()["id"]))
            fixtures.append(TenantFixture(token, user_id, (run_ids[0], run_ids[1])))
    return fixtures


def tenant(fixture: TenantFixture, number: int) -> Tenant:
    """Half the tenants name their organisation in a header; the others leave it to the server to find."""
    headers = {"Authorization": f"Bearer {fixture.token}"}
    if number % 2 == 0:
        headers["X-Organization-Id"] = str(ORG_ID)
    run, traced = fixture.run_ids
    owned = frozenset(fixture.run_ids)
    calls = (
        Call("tools/call", "get_agent_run", {"agent_run_id": run}, owned),
        Call("tools/call", "get_agent_run_logs", {"agent_run_id": traced, "limit": 20}, owned),
        Call("tools/call", "get_agent_run", {"agent_run_id": traced}, owned),
        Call("tools/call", "list_agent_runs", {"user_id": fixture.user_id, "limit": 5}, owned),
    )
    return Tenant(headers, calls)


@dataclass
class TokenCheck:
    """Whose token each request that reached the service carried, against whose run (or user) it named."""

    attributed: int = 0  # requests naming a tenant's run or user
    foreign: int = 0  # ... that carried another token than that tenant's
    unattributed: int = 0  # requests naming nobody (e.g. the organisation list), checked for a tenant's token only
    unknown_token: int = 0  # requests under a token no tenant has (or none)


RUN_IN_PATH = re.compile(r"/agent/run/(\d+)")
USER_IN_QUERY = re.compile(r"(?:^|&)user_id=(\d+)")


def check_tokens(records: Sequence[RequestRecord], fixtures: Sequence[TenantFixture]) -> TokenCheck:
    expected_by_run = {run: token_hash(f.token) for f in fixtures for run in f.run_ids}
    expected_by_user = {f.user_id: token_hash(f.token) for f in fixtures}
    known = set(expected_by_user.values())
    check = TokenCheck()
    for record in records:
        if record.token_hash not in known:
            check.unknown_token += 1
        run = RUN_IN_PATH.search(record.path)
        user = USER_IN_QUERY.search(record.query)
        expected = (expected_by_run.get(int(run[1])) if run else
                    expected_by_user.get(int(user[1])) if user else None)
        if expected is None:
            check.unattributed += 1
            continue
        check.attributed += 1
        if record.token_hash != expected:
            check.foreign += 1
    return check
