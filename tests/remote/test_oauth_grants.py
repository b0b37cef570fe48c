"""Grants over the memory store and over a Redis that does not answer: sealed tokens (what they are bound to, key
rotation, expiry), the one-use rules, what survives the store coming back empty, and tokens of the previous scheme."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from cryptography.fernet import Fernet
from mcp.server.auth.provider import RegistrationError, TokenError
from mcp.shared.auth import OAuthClientInformationFull

from agent_automation_mcp.caching import SharedStore
from agent_automation_mcp.redis_pool import redis_client
from agent_automation_mcp.remote.oauth.clients import CLIENT_PREFIX, MAX_CLIENT_ID_CHARS, Clients
from agent_automation_mcp.remote.oauth.cutoffs import Cutoffs
from agent_automation_mcp.remote.oauth.documents import MetadataDocuments
from agent_automation_mcp.remote.oauth.grants import Grants
from agent_automation_mcp.remote.oauth.sealing import Sealer
from agent_automation_mcp.remote.oauth.store import RETRY_SECONDS, MemoryStore, RedisStore, Store, StoreUnavailable
from agent_automation_mcp.remote.oauth.tokens import (
    ACCESS_SECONDS,
    CLOCK_LEEWAY,
    REFRESH_PREFIX,
    REFRESH_SECONDS,
    TokenSeal,
)
from ports import free_port

RESOURCE = "https://mcp.example.com/mcp"
OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()
STATE, STATE_NEW = "0123456789abcdef" * 4, "fedcba9876543210" * 4
CLIENT = "aamcp_client_c"


def grants_on(store: Store, oauth_keys: list[str] | None = None, state_keys: list[str] | None = None,
              resource: str = RESOURCE) -> Grants:
    return Grants(store, Sealer(oauth_keys or [OLD]), TokenSeal(state_keys or [STATE], resource))


async def signed_in(grants: Grants, scopes: list[str] | None = None, client_id: str = CLIENT) -> dict[str, str]:
    """The tokens of a sign-in made as the consent page makes one (a code, then its exchange)."""
    code = await grants.issue_code(client_id=client_id, redirect_uri="https://app.example/cb",
                                   code_challenge="x" * 43, scopes=scopes or [], service_token="tok-service",
                                   org_id=1, user=7)
    pending = await grants.pending_code(code)
    assert pending is not None
    tokens = await grants.redeem(pending)
    assert tokens.refresh_token is not None
    return {"access": tokens.access_token, "refresh": tokens.refresh_token}


async def refreshed(grants: Grants, refresh_token: str, client_id: str = CLIENT) -> dict[str, str]:
    refresh = await grants.refresh_token(client_id, refresh_token)
    assert refresh is not None
    tokens = await grants.rotate(refresh)
    assert tokens.refresh_token is not None
    return {"access": tokens.access_token, "refresh": tokens.refresh_token}


async def service_token(grants: Grants, access_token: str) -> str | None:
    opened = await grants.signed_in(access_token)
    return opened.service_token if opened is not None else None


class _Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Later:
    """The clock of a replica `seconds` ahead (only `time.time` is read by grants)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def time(self) -> float:
        return time.time() + self.seconds


@pytest.fixture
def unreachable() -> Iterator[RedisStore]:
    """The store over a Redis that does not answer: a real client, to a port nothing listens on."""
    shared = SharedStore(redis_client(f"redis://127.0.0.1:{free_port()}/0"))
    yield RedisStore(shared)


@pytest.mark.anyio
async def test_a_sign_in_goes_on_when_its_store_comes_back_empty_and_a_spent_token_still_ends_it() -> None:
    grants = grants_on(MemoryStore())
    first = await signed_in(grants)
    second = await refreshed(grants, first["refresh"])
    clock = _Clock()
    after = grants_on(MemoryStore(clock=clock))  # the same keys, the store empty
    assert await service_token(after, second["access"]) == "tok-service"
    third = await refreshed(after, second["refresh"])  # the chain starts again from this step
    assert await service_token(after, third["access"]) == "tok-service"
    assert await refreshed(after, second["refresh"]) == third  # retried at once: the same pair
    clock.now += RETRY_SECONDS
    assert await after.is_live(third["refresh"]) and not await after.is_live(second["refresh"])  # spent: budgeted
    replay = await after.refresh_token(CLIENT, second["refresh"])
    assert replay is not None and replay.grant.sealed_token not in repr(replay)
    with pytest.raises(TokenError, match="already used"):
        await after.rotate(replay)
    assert await after.signed_in(third["access"]) is None  # the reuse ended the whole grant
    assert not await after.is_live(third["refresh"])
    with pytest.raises(TokenError, match="has ended"):
        await after.rotate(await after.refresh_token(CLIENT, third["refresh"]))  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_while_redis_does_not_answer_a_sign_in_serves_and_refreshes_but_new_ones_and_revocation_wait(
        unreachable: RedisStore) -> None:
    tokens = await signed_in(grants_on(MemoryStore()))
    down = grants_on(unreachable)
    assert await service_token(down, tokens["access"]) == "tok-service"
    assert await down.is_live(tokens["refresh"])
    fresh = await refreshed(down, tokens["refresh"])
    assert await service_token(down, fresh["access"]) == "tok-service"
    with pytest.raises(StoreUnavailable):
        await down.revoke(fresh["access"])
    with pytest.raises(StoreUnavailable):
        await down.issue_code(client_id=CLIENT, redirect_uri="https://app.example/cb", code_challenge="x" * 43,
                              scopes=[], service_token="tok-service", org_id=1)
    with pytest.raises(StoreUnavailable):  # a token of the previous scheme: only the store knows it
        await down.signed_in("aamcp_at_" + "a" * 43)


@pytest.mark.anyio
async def test_a_token_opens_only_as_what_it_was_issued_for_unaltered_at_its_own_deployment() -> None:
    grants = grants_on(MemoryStore())
    tokens = await signed_in(grants)
    access, refresh = tokens["access"], tokens["refresh"]
    assert await grants.signed_in(REFRESH_PREFIX + refresh.removeprefix(REFRESH_PREFIX)) is None
    assert await grants.signed_in("aamcp_at_" + refresh.removeprefix(REFRESH_PREFIX)) is None  # refresh as access
    assert await grants.refresh_token(CLIENT, "aamcp_rt_" + access.removeprefix("aamcp_at_")) is None
    flipped = access[:40] + ("A" if access[40] != "A" else "B") + access[41:]
    assert await grants.signed_in(flipped) is None
    assert await grants_on(MemoryStore(), resource="https://other.example/mcp").signed_in(access) is None
    assert await grants_on(MemoryStore(), state_keys=[STATE_NEW]).signed_in(access) is None
    assert await grants.refresh_token("aamcp_client_other", refresh) is None  # another client's refresh token
    assert await grants.signed_in("aamcp_at_" + "x" * 5000) is None
    assert "tok-service" not in access + refresh


@pytest.mark.anyio
async def test_an_access_token_ends_after_its_hour_and_a_refresh_token_after_30_unused_days_with_a_minute_to_spare(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A replica whose clock is up to a minute ahead of the one that issued a token still honours it."""
    grants = grants_on(MemoryStore())
    tokens = await signed_in(grants)
    with monkeypatch.context() as later:
        later.setattr("agent_automation_mcp.remote.oauth.grants.time", _Later(ACCESS_SECONDS + CLOCK_LEEWAY - 5))
        assert await service_token(grants, tokens["access"]) == "tok-service"
        later.setattr("agent_automation_mcp.remote.oauth.grants.time", _Later(ACCESS_SECONDS + CLOCK_LEEWAY + 1))
        assert await grants.signed_in(tokens["access"]) is None
        fresh = await refreshed(grants, tokens["refresh"])
        assert await service_token(grants, fresh["access"]) == "tok-service"
        later.setattr("agent_automation_mcp.remote.oauth.grants.time",
                      _Later(ACCESS_SECONDS + REFRESH_SECONDS + CLOCK_LEEWAY))
        assert await grants.refresh_token(CLIENT, tokens["refresh"]) is None
        assert not await grants.is_live(tokens["refresh"])


@pytest.mark.anyio
async def test_rotated_keys_keep_sign_ins_and_a_refresh_moves_them_to_the_new_keys() -> None:
    store = MemoryStore()
    tokens = await signed_in(grants_on(store, [OLD], [STATE]))
    rotating = grants_on(store, [NEW, OLD], [STATE_NEW, STATE])
    assert await service_token(rotating, tokens["access"]) == "tok-service"
    fresh = await refreshed(rotating, tokens["refresh"])
    rotated = grants_on(store, [NEW], [STATE_NEW])  # the old keys dropped
    assert await rotated.signed_in(tokens["access"]) is None
    assert await service_token(rotated, fresh["access"]) == "tok-service"
    assert await refreshed(rotated, fresh["refresh"])


@pytest.mark.anyio
async def test_revoking_either_token_ends_both_and_a_read_only_grant_stays_read_only() -> None:
    grants = grants_on(MemoryStore())
    for revoked in ("access", "refresh"):
        tokens = await signed_in(grants, scopes=["read-only"])
        assert (await grants.signed_in(tokens["access"])).grant.scopes == ["read-only"]  # type: ignore[union-attr]
        await grants.revoke(tokens[revoked])
        assert await grants.signed_in(tokens["access"]) is None
        with pytest.raises(TokenError, match="has ended"):
            await grants.rotate(await grants.refresh_token(CLIENT, tokens["refresh"]))  # type: ignore[arg-type]
    await grants.revoke("aamcp_at_unknown")  # RFC 7009: no error


@pytest.mark.anyio
async def test_a_code_is_spent_once_and_its_replay_ends_the_grant() -> None:
    grants = grants_on(MemoryStore())
    code = await grants.issue_code(client_id=CLIENT, redirect_uri="https://app.example/cb", code_challenge="x" * 43,
                                   scopes=[], service_token="tok-service", org_id=1)
    pending = await grants.pending_code(code)
    assert pending is not None
    token = (await grants.redeem(pending)).access_token
    with pytest.raises(TokenError):
        await grants.redeem(pending)
    assert await grants.signed_in(token) is None


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
    grants = grants_on(MemoryStore())
    with monkeypatch.context() as behind:
        behind.setattr("agent_automation_mcp.remote.oauth.grants.time", _Behind)
        code = await grants.issue_code(client_id=CLIENT, redirect_uri="https://app.example/cb",
                                       code_challenge="x" * 43, scopes=[], service_token="tok-service", org_id=1)
    pending = await grants.pending_code(code)  # on a replica whose clock is right
    assert pending is not None and pending.expires_at > time.time()
    assert (await grants.redeem(pending)).access_token


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


async def _legacy_sign_in(store: Store, sealer: Sealer, access: str, refresh: str, client_id: str) -> None:
    """What the previous release wrote in the store for one sign-in (its grants.py and clients.py)."""
    await store.put("grant:g-old", json.dumps({"id": "g-old", "client_id": client_id, "resource": RESOURCE,
                                               "sealed_token": sealer.seal("tok-service"), "org_id": 1,
                                               "scopes": []}), REFRESH_SECONDS)
    await store.put(f"at:{_digest(access)}", "g-old", ACCESS_SECONDS)
    await store.put(f"rt:{_digest(refresh)}", "g-old", REFRESH_SECONDS)
    client = OAuthClientInformationFull(client_id=client_id, redirect_uris=["https://app.example/cb"],  # type: ignore[list-item]
                                        token_endpoint_auth_method="none")
    await store.put(f"client:{client_id}", client.model_dump_json(exclude_none=True), 3600)


@pytest.mark.anyio
async def test_a_sign_in_of_the_previous_scheme_serves_and_its_refresh_token_is_taken_once_for_sealed_ones() -> None:
    store, sealer = MemoryStore(), Sealer([OLD])
    access, refresh, client_id = "aamcp_at_" + "a" * 43, "aamcp_rt_" + "r" * 43, "0f8b5c1e-legacy-client"
    await _legacy_sign_in(store, sealer, access, refresh, client_id)
    grants = Grants(store, sealer, TokenSeal([STATE], RESOURCE))
    clients = Clients([STATE], RESOURCE, store, MetadataDocuments(store))
    assert (await clients.get(client_id)) is not None  # its registration is still read
    assert await service_token(grants, access) == "tok-service"
    assert await grants.is_live(refresh)
    sealed = await refreshed(grants, refresh, client_id)
    assert len(sealed["access"]) > 100 and await service_token(grants, sealed["access"]) == "tok-service"
    assert await grants.signed_in(access) is None  # the old record went with the old refresh token
    old = await grants.refresh_token(client_id, refresh)
    assert old is None  # spent: and presenting it again ended the grant it started
    assert await grants.signed_in(sealed["access"]) is None


@pytest.mark.anyio
async def test_a_registration_is_its_client_id_bound_to_this_deployment_and_bounded_in_size() -> None:
    store = MemoryStore()
    clients = Clients([STATE], RESOURCE, store, MetadataDocuments(store))
    client = OAuthClientInformationFull(client_id="from-the-sdk", client_secret="s3cret", client_name="App",
                                        redirect_uris=["https://claude.ai/cb"],  # type: ignore[list-item]
                                        token_endpoint_auth_method="client_secret_post")
    clients.register(client)
    assert client.client_id.startswith(CLIENT_PREFIX) and len(client.client_id) < MAX_CLIENT_ID_CHARS
    assert "s3cret" not in client.client_id and "App" not in client.client_id
    known = await Clients([STATE_NEW, STATE], RESOURCE, MemoryStore(), MetadataDocuments(store)).get(client.client_id)
    assert known is not None and known.client_name == "App" and known.client_id == client.client_id
    assert known.client_secret == _digest("s3cret")  # the secret's hash only
    assert await Clients([STATE], "https://other.example/mcp", store, MetadataDocuments(store)).get(
        client.client_id) is None
    altered = client.client_id[:-2] + ("AA" if client.client_id[-2:] != "AA" else "BB")
    assert await clients.get(altered) is None
    big = OAuthClientInformationFull(client_id="x", redirect_uris=[  # type: ignore[list-item]
        f"https://claude.ai/{n}/{'p' * 480}" for n in range(10)])
    with pytest.raises(RegistrationError, match="larger than"):
        clients.register(big)



@pytest.mark.anyio
async def test_the_state_key_alone_cannot_revive_a_revoked_grant_under_another_id_or_time() -> None:
    """Whoever holds a state key can open a token and seal its contents again; the sign-in keys bind the service
    token to its grant's id, start and person, so a revoked grant re-sealed as a new one, or as a newer one, is dead."""
    grants = grants_on(MemoryStore())
    tokens = await signed_in(grants)
    await grants.revoke(tokens["access"])
    seal = TokenSeal([STATE], RESOURCE)
    opened = seal.open("aamcp_at_", tokens["access"], time.time())
    assert opened is not None
    revived = seal.seal("aamcp_at_", replace(opened.grant, id="a-new-grant-id"), int(time.time()) + 3600)
    assert await grants.signed_in(revived) is None
    fresh = await signed_in(grants)  # a live grant's token still opens, re-sealed as it was
    live = seal.open("aamcp_at_", fresh["access"], time.time())
    assert live is not None
    assert await service_token(grants, seal.seal("aamcp_at_", live.grant, int(time.time()) + 60)) == "tok-service"


@pytest.mark.anyio
async def test_the_operators_ends_by_time_and_by_person_hold_without_any_store() -> None:
    store = MemoryStore()
    before = await signed_in(grants_on(store))  # a sign-in of user 7
    made = time.time()
    for cutoffs, ended in ((Cutoffs(before=made + 1), True), (Cutoffs(before=made - 60), False),
                           (Cutoffs(users={7: made + 1}), True), (Cutoffs(users={8: made + 1}), False),
                           (Cutoffs(users={7: made - 60}), False)):
        grants = Grants(MemoryStore(), Sealer([OLD]), TokenSeal([STATE], RESOURCE), cutoffs)  # an empty store
        assert (await grants.signed_in(before["access"]) is None) is ended, cutoffs
        refresh = await grants.refresh_token(CLIENT, before["refresh"])
        assert refresh is not None
        if ended:
            with pytest.raises(TokenError, match="has ended"):
                await grants.rotate(refresh)
        else:
            assert (await grants.rotate(refresh)).access_token
    grants = Grants(store, Sealer([OLD]), TokenSeal([STATE], RESOURCE), Cutoffs(before=made + 1))
    assert await service_token(grants, (await signed_in(grants))["access"]) is None  # made "now", before the cut-off


@pytest.mark.anyio
async def test_after_a_leak_the_retired_state_key_still_opens_registrations_and_new_sign_in_keys_end_old_sign_ins(
        ) -> None:
    """docs/rollouts.md's answer to a leaked state key: `new,leaked` state keys and new sign-in keys."""
    store = MemoryStore()
    client = OAuthClientInformationFull(client_id="x", redirect_uris=["https://claude.ai/cb"])  # type: ignore[list-item]
    Clients([STATE], RESOURCE, store, MetadataDocuments(store)).register(client)
    before = await signed_in(grants_on(store, [OLD], [STATE]), client_id=client.client_id)
    after = grants_on(store, [NEW], [STATE_NEW, STATE])
    retired = Clients([STATE_NEW, STATE], RESOURCE, store, MetadataDocuments(store))
    assert await retired.get(client.client_id) is not None  # the app still reaches the consent page
    assert await after.signed_in(before["access"]) is None
    with pytest.raises(TokenError, match="has ended"):
        await after.rotate(await after.refresh_token(client.client_id, before["refresh"]))  # type: ignore[arg-type]
    opened = TokenSeal([STATE], RESOURCE).open("aamcp_at_", before["access"], time.time())
    assert opened is not None  # what the leaked key re-seals is dead with the old sign-in keys
    assert await after.signed_in(TokenSeal([STATE], RESOURCE).seal("aamcp_at_", opened.grant,
                                                                   int(time.time()) + 3600)) is None
    again = await signed_in(after, client_id=client.client_id)  # its person signs in again, through the same app
    assert await service_token(after, again["access"]) == "tok-service"
