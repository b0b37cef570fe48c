"""Sign-in across replicas: two servers sharing a redis-server behind a round-robin balancer (Debian's haproxy).

The SDK's OAuth client signs in through the balancer, by Dynamic Client Registration and by a Client ID Metadata
Document (served over https on loopback with a certificate made for the test; the servers trust it through
`SSL_CERT_FILE`, and `AGENT_AUTOMATION_OAUTH_TRUSTED_CLIENT_HOSTS` names that one loopback host:port, the only way
a private address is ever fetched). Any replica honours what another issued, and a revocation holds on both.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import anyio
import httpx2
import pytest
from cryptography.fernet import Fernet
from harness import RATE_LIMITS, SHARED_KEYS, HttpServer, clean_env, free_port, http_servers, metric
from loopback_tls import DocumentServer, make_certificate
from mcp.shared.auth import OAuthToken
from oauth_flow import REDIRECT_URI, MemoryTokens, Person, RawFlow, oauth_client, once_redis_is_asked_again, pkce
from redis import Redis

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.remote.oauth.store import RETRY_SECONDS
from agent_automation_mcp.remote.oauth.tokens import TokenSeal
from agent_automation_mcp.remote.redis_watch import WATCH_SECONDS
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.sandbox.state import token_hash
from pacing.redis_server import RedisServer

ALICE, CAROL = "tok-alice-org1", "tok-carol-both"  # Carol signs in by the browser test
DORA = "tok-dora-org1"  # another person
KEYS = f"{Fernet.generate_key().decode()},{Fernet.generate_key().decode()}"
CIMD_PATH = "/oauth/client.json"


def _binary(name: str) -> str:
    binary = shutil.which(name)
    if binary is None:
        pytest.skip(f"{name} is not installed (Debian: apt-get install {name})")
    return binary


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer(_binary("redis-server"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    config = SandboxConfig(tokens=(ALICE, CAROL, DORA), visible_orgs=2, token_orgs={ALICE: (1,), DORA: (1,)},
                           rate_limits=parse_rate_limits(RATE_LIMITS))
    with SandboxServer(config) as server:
        yield server


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DocumentServer, Path]]:
    cert, key = make_certificate(tmp_path_factory.mktemp("tls"))
    served: dict[str, object] = {}
    server = DocumentServer(cert, key, served)
    served[CIMD_PATH] = {"client_id": server.url(CIMD_PATH), "client_name": "Metadata Document Client",
                         "redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none",
                         "grant_types": ["authorization_code", "refresh_token"]}
    yield server, cert
    server.stop()


class Cluster:
    """Two replicas on one Redis and one public URL, and haproxy sending requests to them in turn."""

    def __init__(self, sandbox: SandboxServer, redis_url: str, cert: Path, trusted: str, work: Path) -> None:
        self.port = free_port()
        self.origin = f"http://127.0.0.1:{self.port}"
        env = clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS,
                        AGENT_AUTOMATION_REDIS_URL=redis_url, AGENT_AUTOMATION_OAUTH_KEYS=KEYS,
                        AGENT_AUTOMATION_OAUTH_SIGNINS_PER_MINUTE="200", SSL_CERT_FILE=str(cert),
                        AGENT_AUTOMATION_OAUTH_TRUSTED_CLIENT_HOSTS=trusted, **SHARED_KEYS)
        args = ("--auth", "oauth", "--public-url", self.origin, "--allowed-host", f"127.0.0.1:{self.port}")
        self.replica_env, self.replica_args = env, args  # for another replica a test starts beside them
        self.replicas = http_servers(2, env, *args)
        config = work / "haproxy.cfg"
        config.write_text("\n".join([
            "global", "  maxconn 256", "defaults", "  mode http", "  timeout connect 5s", "  timeout client 120s",
            "  timeout server 120s", "frontend mcp", f"  bind 127.0.0.1:{self.port}", "  default_backend replicas",
            "backend replicas", "  balance roundrobin", "  option http-server-close",
            "  http-response set-header X-Replica %s",
            *(f"  server r{i} 127.0.0.1:{replica.port}" for i, replica in enumerate(self.replicas)), ""]))
        self.balancer = HttpServer({}, port=self.port, command=[_binary("haproxy"), "-db", "-f", str(config)])

    @property
    def url(self) -> str:
        return f"{self.origin}/mcp"

    def stop(self) -> list[str]:
        self.balancer.stop()
        return [replica.stop() for replica in self.replicas]


@pytest.fixture(scope="module")
def cluster(sandbox: SandboxServer, redis_server: RedisServer, documents: tuple[DocumentServer, Path],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    server, cert = documents
    cluster = Cluster(sandbox, redis_server.url, cert, f"127.0.0.1:{server.port}", tmp_path_factory.mktemp("lb"))
    yield cluster
    for stderr in cluster.stop():
        assert ALICE not in stderr and CAROL not in stderr and DORA not in stderr and "aamcp_at_" not in stderr


def test_the_balancer_sends_requests_to_both_replicas(cluster: Cluster) -> None:
    flow = RawFlow(cluster.origin)
    served = {flow.http.get(f"{cluster.origin}/healthz").headers["x-replica"] for _ in range(4)}
    assert served == {"r0", "r1"}


@pytest.mark.anyio
@pytest.mark.parametrize("registration", ["dcr", "cimd"])
async def test_the_sdk_client_signs_in_through_the_balancer(cluster: Cluster, sandbox: SandboxServer,
                                                            documents: tuple[DocumentServer, Path],
                                                            registration: str) -> None:
    server = documents[0]
    metadata_url = server.url(CIMD_PATH) if registration == "cimd" else None
    person, storage = Person(ALICE), MemoryTokens()
    client, provider = oauth_client(cluster.url, person, storage, client_metadata_url=metadata_url)
    async with client:
        for _ in range(4):  # both replicas serve calls made with the one access token
            assert not (await client.call_tool("list_users", {})).is_error
        assert sandbox.state.request_log[-1].token_hash == token_hash(ALICE)
        if registration == "cimd":
            assert storage.client is not None and storage.client.client_id == metadata_url
            assert "Metadata Document Client</strong> (described by <strong>127.0.0.1:" in person.pages[0]
            assert CIMD_PATH in server.fetched
        first = storage.tokens
        provider.context.token_expiry_time = time.time() - 1
        assert not (await client.call_tool("list_users", {})).is_error
        assert storage.tokens is not None and storage.tokens.access_token != (first or OAuthToken(
            access_token="")).access_token
    flow = RawFlow(cluster.origin)
    assert storage.client is not None and storage.tokens is not None
    assert flow.revoke(storage.tokens.access_token, storage.client.client_id).status_code == 200
    for replica in cluster.replicas:  # the revocation holds on both at once
        assert flow.mcp_status(storage.tokens.access_token, replica.origin).status_code == 401


def test_a_token_issued_by_one_replica_works_on_the_other(cluster: Cluster) -> None:
    first, second = (RawFlow(replica.origin) for replica in cluster.replicas)
    client_id = first.register()
    code, verifier = first.code(client_id, ALICE)  # consent on the first
    tokens = second.exchange(client_id, code, verifier).json()  # code spent on the second
    assert first.mcp_status(tokens["access_token"]).status_code == 200
    assert second.mcp_status(tokens["access_token"]).status_code == 200
    refreshed = first.refresh(client_id, tokens["refresh_token"]).json()
    refreshed = first.refresh(client_id, refreshed["refresh_token"]).json()
    replay = second.refresh(client_id, tokens["refresh_token"])  # the spent token, on the other replica
    assert replay.json()["error"] == "invalid_grant"
    assert first.mcp_status(refreshed["access_token"]).status_code == 401


def test_redis_holds_no_token_and_nothing_a_sign_in_needs_to_go_on(cluster: Cluster,
                                                                     redis_server: RedisServer) -> None:
    """What a sign-in leaves in Redis is its spent code's grant id (its consent page's mark goes with its use), its
    chain of refreshes
    and, for 10 s, each refresh's pair sealed for the refresh token spent (so a retry gets it: it opens with that
    token alone): no token, client record or service token one could use; a revocation adds the grant's end, and
    its place in the index of ends."""
    redis = Redis.from_url(redis_server.url, decode_responses=True)
    lost = [metric(replica, "agent_automation_redis_data_lost_total") for replica in cluster.replicas]
    redis.flushall()
    # Each replica finds Redis empty at its next look (every 5 s) and gives back the ends it holds of earlier tests,
    # which may come while this one runs (and later, the longer a busy machine or pacing holds its requests up):
    # once each has, only this test's sign-in is what Redis holds of sign-ins.
    assert _until(lambda: all(metric(replica, "agent_automation_redis_data_lost_total") > before
                              for replica, before in zip(cluster.replicas, lost, strict=True)))
    for key in redis.scan_iter("aamcp:oauth:*"):
        redis.delete(key)
    flow = RawFlow(cluster.origin)
    client_id = flow.register()
    first = flow.tokens(client_id, ALICE)
    tokens = flow.refresh(client_id, first["refresh_token"]).json()
    assert flow.revoke(tokens["access_token"], client_id).status_code == 200
    stored = {key: redis.get(key) or "" for key in redis.scan_iter("aamcp:oauth:*") if redis.type(key) == "string"}
    assert {key.split(":")[2] for key in stored} == {"code-spent", "chain", "ended", "retry"}
    assert all(len(value) <= 32 for key, value in stored.items() if ":retry:" not in key), stored
    assert redis.zrange("aamcp:oauth:ends", 0, -1) == [_grant_of(cluster, tokens)]
    every = "".join(key + value for key, value in stored.items())
    assert not any(secret[:40] in every for secret in (client_id, tokens["refresh_token"], tokens["access_token"],
                                                       first["refresh_token"], ALICE))


def test_a_token_for_another_resource_is_refused_by_it(cluster: Cluster, sandbox: SandboxServer,
                                                       redis_server: RedisServer) -> None:
    """Another deployment on the same Redis (another public URL, so another resource) honours none of these."""
    tokens = RawFlow(cluster.origin).tokens(RawFlow(cluster.origin).register(), ALICE)
    port = free_port()
    other = HttpServer(clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_REDIS_URL=redis_server.url,
                                 AGENT_AUTOMATION_OAUTH_KEYS=KEYS, **SHARED_KEYS),
                       "--auth", "oauth", "--public-url", f"http://localhost:{port}", port=port)
    try:
        assert RawFlow(other.origin).mcp_status(tokens["access_token"]).status_code == 401
    finally:
        other.stop()


def _until(check: Callable[[], bool]) -> bool:
    """Whether `check()` comes true within six of the replicas' looks at Redis (every 5 s: room for a loaded
    machine), asked twice a second."""
    for _ in range(2 * int(6 * WATCH_SECONDS)):
        if check():
            return True
        time.sleep(0.5)
    return False


def _refused_everywhere(cluster: Cluster, client_id: str, tokens: dict[str, str]) -> bool:
    flows = [RawFlow(replica.origin) for replica in cluster.replicas]
    return all(flow.mcp_status(tokens["access_token"]).status_code == 401 for flow in flows) and all(
        flow.refresh(client_id, tokens["refresh_token"]).status_code == 400 for flow in flows)


def test_a_revoked_sign_in_stays_revoked_and_a_spent_refresh_token_gets_nothing_after_redis_comes_back_empty(
        cluster: Cluster, redis_server: RedisServer) -> None:
    """Issue 45: after Redis came back empty a revoked sign-in worked again (access and refresh 200), and a thief's
    spent refresh token got a fresh hour. Every replica keeps the ends and chains it knows, and gives them back."""
    first, second = (RawFlow(replica.origin) for replica in cluster.replicas)
    client_id = first.register()
    revoked = first.refresh(client_id, first.tokens(client_id, ALICE)["refresh_token"]).json()
    assert first.revoke(revoked["access_token"], client_id).status_code == 200  # made on the first replica only
    spent, owners = [], []
    for refreshes in (1, 2):  # two sign-ins, refreshed on the first replica: their chains past `spent`
        owner = first.tokens(client_id, ALICE)
        spent.append(owner["refresh_token"])
        for _ in range(refreshes):
            owner = first.refresh(client_id, owner["refresh_token"]).json()
        owners.append(owner)
    time.sleep(RETRY_SECONDS + 1)  # a spent token is no retry any more
    redis_server.flush()  # Redis without its data, as after a restart without persistence
    assert first.mcp_status(revoked["access_token"]).status_code == 401  # at once where it was made (was 200)
    assert first.refresh(client_id, revoked["refresh_token"]).status_code == 400
    assert _until(lambda: _refused_everywhere(cluster, client_id, revoked))  # each replica learnt it, or was given it
    at_once = first.refresh(client_id, spent[0])  # at once, on the replica that made the chain
    assert at_once.status_code == 400 and at_once.json()["error"] == "invalid_grant"  # was 200, a fresh hour
    with Redis.from_url(redis_server.url, decode_responses=True) as redis:  # given back at the first replica's look
        assert _until(lambda: redis.exists(f"aamcp:oauth:ended:{_grant_of(cluster, revoked)}") == 1
                      and redis.get(f"aamcp:oauth:chain:{_grant_of(cluster, owners[1])}") == "2")
    stolen = second.refresh(client_id, spent[1])  # later, on the replica that never saw the chain
    assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant"
    lost = sum(metric(replica, "agent_automation_redis_data_lost_total") for replica in cluster.replicas)
    assert lost >= 1


def test_a_revocation_while_redis_is_down_holds_at_once_where_it_was_made_and_everywhere_once_redis_answers(
        cluster: Cluster, redis_server: RedisServer) -> None:
    first = RawFlow(cluster.replicas[0].origin)
    client_id = first.register()
    tokens = first.tokens(client_id, ALICE)
    redis_server.stop()
    try:
        answer = first.revoke(tokens["access_token"], client_id)
        assert answer.status_code == 503 and answer.headers["retry-after"]
        assert "the others still honour its tokens" in answer.json()["error_description"]
        assert first.mcp_status(tokens["access_token"]).status_code == 401  # on the replica that took it: at once
    finally:
        redis_server.start()  # empty
    assert _until(lambda: _refused_everywhere(cluster, client_id, tokens))


@pytest.mark.anyio
async def test_two_refreshes_with_one_token_at_once_on_two_replicas_get_one_pair_and_the_sign_in_goes_on(
        cluster: Cluster) -> None:
    """Issue 45: two refreshes with the same token at once ended the whole sign-in."""
    flows = [RawFlow(replica.origin) for replica in cluster.replicas]
    client_id = flows[0].register()
    tokens = flows[0].tokens(client_id, ALICE)
    answers: list[httpx2.Response] = []

    async def refresh(flow: RawFlow) -> None:
        answers.append(await anyio.to_thread.run_sync(flow.refresh, client_id, tokens["refresh_token"]))

    async with anyio.create_task_group() as group:
        for flow in flows:
            group.start_soon(refresh, flow)
    assert [answer.status_code for answer in answers] == [200, 200] and answers[0].json() == answers[1].json()
    pair = answers[0].json()
    again = flows[1].refresh(client_id, tokens["refresh_token"])  # one after the other, on the other replica
    assert again.status_code == 200 and again.json() == pair
    assert all(flow.mcp_status(pair["access_token"]).status_code == 200 for flow in flows)
    assert flows[1].refresh(client_id, pair["refresh_token"]).status_code == 200


def test_the_operator_ends_every_sign_in_made_before_a_time_and_one_persons_whatever_redis_holds(
        cluster: Cluster, sandbox: SandboxServer, redis_server: RedisServer) -> None:
    flow = RawFlow(cluster.origin)
    client_id = flow.register()
    alice, dora = flow.tokens(client_id, ALICE), flow.tokens(client_id, DORA)
    time.sleep(1.1)  # sign-ins are timed to the second
    cut = time.time()
    time.sleep(1.1)
    later = flow.tokens(client_id, ALICE)
    users = {token: httpx2.get(f"{sandbox.url}/v1/users/me", headers={"authorization": f"Bearer {token}"}).json()["id"]
             for token in (ALICE, DORA)}
    redis_server.flush()  # nothing of this lives in Redis
    for setting, ended, kept in (
            ({"AGENT_AUTOMATION_OAUTH_ENDED_BEFORE": str(cut)}, (alice, dora), (later,)),
            ({"AGENT_AUTOMATION_OAUTH_ENDED_USERS": f"{users[ALICE]}@{cut}"}, (alice,), (dora, later))):
        replica = HttpServer(cluster.replica_env | setting, *cluster.replica_args)
        try:
            there = RawFlow(replica.origin)
            assert [there.mcp_status(t["access_token"]).status_code for t in ended] == [401] * len(ended)
            assert [there.refresh(client_id, t["refresh_token"]).status_code for t in ended] == [400] * len(ended)
            assert [there.mcp_status(t["access_token"]).status_code for t in kept] == [200] * len(kept)
        finally:
            replica.stop()


def test_after_a_leaked_state_key_is_retired_with_new_sign_in_keys_apps_still_reach_the_consent_page(
        cluster: Cluster) -> None:
    """docs/rollouts.md's answer to a leaked state key: `new,leaked` state keys and new sign-in keys. Dropping the
    leaked key made every app registered under it unknown; retired, it still opens their registrations, while
    every sign-in sealed before ends."""
    flow = RawFlow(cluster.origin)
    client_id = flow.register()
    tokens = flow.tokens(client_id, ALICE)
    leaked = SHARED_KEYS["AGENT_AUTOMATION_STATE_KEYS"]
    rotated = cluster.replica_env | {"AGENT_AUTOMATION_STATE_KEYS": f"{'n' * 40},{leaked}",
                                     "AGENT_AUTOMATION_OAUTH_KEYS": Fernet.generate_key().decode()}
    replica = HttpServer(rotated, *cluster.replica_args)
    try:
        there = RawFlow(replica.origin)
        assert there.consent_page(client_id, pkce()[1]).status_code == 200  # the app is still known
        assert there.mcp_status(tokens["access_token"]).status_code == 401  # its sign-in sealed before ended
        assert there.refresh(client_id, tokens["refresh_token"]).json()["error"] == "invalid_grant"
        again = there.tokens(client_id, ALICE)  # its person signs in again, through the same app
        assert there.mcp_status(again["access_token"]).status_code == 200
    finally:
        replica.stop()


def test_while_redis_is_down_a_sign_in_serves_and_refreshes_and_only_new_sign_ins_wait(
        cluster: Cluster, redis_server: RedisServer) -> None:
    flow = RawFlow(cluster.origin)
    client_id = flow.register()
    tokens = flow.tokens(client_id, ALICE)
    redis_server.stop()
    try:
        assert flow.mcp_status(tokens["access_token"]).status_code == 200  # on both replicas (round robin)
        assert flow.mcp_status(tokens["access_token"]).status_code == 200
        refreshed = flow.refresh(client_id, tokens["refresh_token"])
        assert refreshed.status_code == 200, refreshed.text
        assert flow.mcp_status(refreshed.json()["access_token"]).status_code == 200
        assert flow.register() != client_id  # a registration needs no store either
        page = flow.consent_page(client_id, pkce()[1])  # a new sign-in's code and page do: 503, to try again
        assert page.status_code == 503 and page.headers["retry-after"]
        assert flow.revoke(tokens["access_token"], client_id).status_code == 503  # not recorded: said so
        assert flow.mcp_status(ALICE).status_code == 200  # a plain service token needs no store
    finally:
        redis_server.start()
    for replica in cluster.replicas:  # each asks Redis again once its pause after the failure is over
        page = partial(RawFlow(replica.origin).consent_page, client_id, pkce()[1])
        assert once_redis_is_asked_again(page).status_code == 200
    flow.tokens(flow.register(), ALICE)  # sign-in works again (what Redis held is gone: it kept no copy on disk)


def _grant_of(cluster: Cluster, tokens: dict[str, str]) -> str:
    """The grant an access token stands for, opened with the cluster's state key (as a replica opens it)."""
    opened = TokenSeal([SHARED_KEYS["AGENT_AUTOMATION_STATE_KEYS"]], cluster.url).open(
        "aamcp_at_", tokens["access_token"], time.time())
    assert opened is not None
    return opened.grant.id
