"""Grants over the memory store: key rotation (the first key seals, every key opens) and the one-use rules."""

from __future__ import annotations

import time

import pytest
from cryptography.fernet import Fernet
from mcp.server.auth.provider import TokenError

from agent_automation_mcp.remote.oauth.grants import Grants
from agent_automation_mcp.remote.oauth.sealing import Sealer
from agent_automation_mcp.remote.oauth.store import MemoryStore

RESOURCE = "https://mcp.example.com/mcp"
OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


async def _signed_in(grants: Grants) -> str:
    code = await grants.issue_code(client_id="c", redirect_uri="https://app.example/cb", code_challenge="x" * 43,
                                   scopes=[], service_token="tok-service", org_id=1)
    pending = await grants.pending_code(code)
    assert pending is not None
    return (await grants.redeem(pending)).access_token


@pytest.mark.anyio
async def test_a_rotated_key_keeps_old_sign_ins_until_it_is_dropped() -> None:
    store = MemoryStore()
    token = await _signed_in(Grants(store, Sealer([OLD]), RESOURCE))
    rotated = await Grants(store, Sealer([NEW, OLD]), RESOURCE).signed_in(token)
    assert rotated is not None and rotated.service_token == "tok-service"
    assert await Grants(store, Sealer([NEW]), RESOURCE).signed_in(token) is None  # the old key dropped


@pytest.mark.anyio
async def test_a_code_is_spent_once_and_a_grant_for_another_resource_is_not_honoured() -> None:
    store = MemoryStore()
    grants = Grants(store, Sealer([OLD]), RESOURCE)
    code = await grants.issue_code(client_id="c", redirect_uri="https://app.example/cb", code_challenge="x" * 43,
                                   scopes=[], service_token="tok-service", org_id=1)
    pending = await grants.pending_code(code)
    assert pending is not None
    token = (await grants.redeem(pending)).access_token
    with pytest.raises(TokenError):
        await grants.redeem(pending)
    assert await grants.signed_in(token) is None  # the replay ended the grant
    assert await Grants(store, Sealer([OLD]), "https://other.example/mcp").signed_in(
        await _signed_in(grants)) is None


def test_a_key_that_is_not_a_fernet_key_is_refused_with_its_position() -> None:
    with pytest.raises(ValueError, match="key 2 is not a Fernet key"):
        Sealer([OLD, "hunter2"])


class _Behind:
    """The clock of a replica two minutes behind the others (only `time.time` is read by grants)."""

    @staticmethod
    def time() -> float:
        return time.time() - 120


@pytest.mark.anyio
async def test_a_code_issued_by_a_replica_whose_clock_is_behind_is_live_wherever_it_is_redeemed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's expiry (Redis TTL) is the one that counts: the replica that redeems restates it in its own clock,
    so the SDK's check (`expires_at < time.time()`) passes for as long as the store holds the code."""
    store = MemoryStore()
    grants = Grants(store, Sealer([OLD]), RESOURCE)
    with monkeypatch.context() as behind:
        behind.setattr("agent_automation_mcp.remote.oauth.grants.time", _Behind)
        code = await grants.issue_code(client_id="c", redirect_uri="https://app.example/cb", code_challenge="x" * 43,
                                       scopes=[], service_token="tok-service", org_id=1)
    pending = await grants.pending_code(code)  # on a replica whose clock is right
    assert pending is not None and pending.expires_at > time.time()
    assert (await grants.redeem(pending)).access_token
