"""Sign-in with OAuth (`--auth oauth`) on one server with its memory store: the SDK's own OAuth client end to end,
and the requests a hostile client would send."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx2
import pytest
from harness import ERAS, MODES, RATE_LIMITS, HttpServer, clean_env, free_port, tenant_client
from oauth_flow import (
    REDIRECT_URI,
    MemoryTokens,
    Person,
    RawFlow,
    hidden_fields,
    oauth_client,
    organisation_options,
    pkce,
    query_of,
)

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.sandbox.state import token_hash

ALICE, CAROL, DORA = "tok-alice-org1", "tok-carol-both", "tok-dora-org1"  # Carol sees both organisations


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    config = SandboxConfig(tokens=(ALICE, CAROL, DORA), visible_orgs=2, token_orgs={ALICE: (1,), DORA: (1,)},
                           rate_limits=parse_rate_limits(RATE_LIMITS))
    with SandboxServer(config) as server:
        yield server


def oauth_server(sandbox: SandboxServer, **env: str) -> HttpServer:
    port = free_port()
    env = {"AGENT_AUTOMATION_OAUTH_SIGNINS_PER_MINUTE": "200"} | env
    return HttpServer(clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS, **env),
                      "--auth", "oauth", "--public-url", f"http://127.0.0.1:{port}", "--log-level", "DEBUG", port=port)


@pytest.fixture(scope="module")
def server(sandbox: SandboxServer) -> Iterator[HttpServer]:
    server = oauth_server(sandbox)
    yield server
    stderr = server.stop()
    assert all(token not in stderr for token in (ALICE, CAROL, DORA)), "a service token reached the log"
    assert "aamcp_at_" not in stderr and "aamcp_rt_" not in stderr and "aamcp_code_" not in stderr


@pytest.fixture
def flow(server: HttpServer) -> RawFlow:
    return RawFlow(server.origin)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_the_sdk_client_signs_in_calls_tools_refreshes_and_is_revoked(server: HttpServer, sandbox: SandboxServer,
                                                                          mode: str) -> None:
    person, storage = Person(ALICE), MemoryTokens()
    client, provider = oauth_client(server.url, person, storage, mode=mode)
    async with client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert "list_users" in tools and client.protocol_version == ERAS[mode]
        result = await client.call_tool("list_users", {})
        assert not result.is_error, result
        seen = sandbox.state.request_log[-1]
        assert seen.path == "/v1/organizations/1/users" and seen.token_hash == token_hash(ALICE)
        first = storage.tokens
        assert first is not None and first.access_token.startswith("aamcp_at_") and first.expires_in == 3600
        assert storage.client is not None and storage.client.client_id  # registered by DCR
        page = person.pages[0]
        assert "Test Client</strong> (a name the app gave itself)" in page and "127.0.0.1:9" in page
        assert 'type="password" name="token"' in page

        provider.context.token_expiry_time = time.time() - 1  # the hour is up: the client refreshes
        assert not (await client.call_tool("list_users", {})).is_error
        second = storage.tokens
        assert second is not None and second.access_token != first.access_token
        assert second.refresh_token != first.refresh_token

    flow = RawFlow(server.origin)
    assert flow.revoke(second.refresh_token or "", storage.client.client_id).status_code == 200
    assert flow.mcp_status(second.access_token).status_code == 401  # either token ends the whole grant
    assert flow.refresh(storage.client.client_id, second.refresh_token or "").json()["error"] == "invalid_grant"


def test_the_metadata_points_clients_at_this_server(server: HttpServer) -> None:
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
        resource = httpx2.get(server.origin + path).json()
        assert resource["resource"] == server.url
        assert resource["authorization_servers"] == [server.origin + "/"]
    metadata = httpx2.get(server.origin + "/.well-known/oauth-authorization-server").json()
    assert metadata["client_id_metadata_document_supported"] is True
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert "none" in metadata["token_endpoint_auth_methods_supported"]
    for name in ("authorization", "token", "registration", "revocation"):
        assert metadata[f"{name}_endpoint"].startswith(server.origin + "/")


def test_a_401_says_where_to_sign_in_and_a_service_token_still_works(server: HttpServer, flow: RawFlow) -> None:
    answer = flow.http.post(server.url, json={})
    assert answer.status_code == 401
    assert (f'resource_metadata="{server.origin}/.well-known/oauth-protected-resource/mcp"'
            in answer.headers["www-authenticate"])
    assert flow.mcp_status(ALICE).status_code == 200  # Authorization: Bearer <service token>, as --auth request
    refused = flow.mcp_status("aamcp_at_made-up")
    assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["www-authenticate"]


def test_a_token_that_sees_several_organisations_is_asked_which(server: HttpServer, sandbox: SandboxServer,
                                                                 flow: RawFlow) -> None:
    client_id = flow.register()
    verifier, challenge = pkce()
    asked = flow.approve(flow.consent_page(client_id, challenge), CAROL)
    assert asked.status_code == 200 and organisation_options(asked.text) == ["1", "2"]
    assert CAROL not in asked.text  # carried sealed, never echoed
    chosen = flow.http.post(f"{server.origin}/authorize",
                            data={**hidden_fields(asked.text), "organization": "2", "action": "approve"})
    assert chosen.status_code == 303
    tokens = flow.exchange(client_id, query_of(chosen.headers["location"])["code"], verifier).json()
    assert flow.mcp_status(tokens["access_token"]).status_code == 200


def test_an_organisation_named_beside_a_sign_in_is_refused_as_beside_a_token(server: HttpServer) -> None:
    """Issue 47: under a sign-in, X-Organization-Id naming another organisation was ignored (the sign-in's stood in
    for it); docs/remote.md promises the refusal a token gets. Carol signs in choosing organisation 2."""
    flow = RawFlow(server.origin)
    client_id = flow.register()
    verifier, challenge = pkce()
    asked = flow.approve(flow.consent_page(client_id, challenge), CAROL)
    chosen = flow.http.post(f"{server.origin}/authorize",
                            data={**hidden_fields(asked.text), "organization": "2", "action": "approve"})
    token = flow.exchange(client_id, query_of(chosen.headers["location"])["code"], verifier).json()["access_token"]
    other = flow.mcp_status(token, x_organization_id="1")  # Carol's, but not the sign-in's
    stranger = flow.mcp_status(token, x_organization_id="7")
    assert flow.mcp_status(token, x_organization_id="2").status_code == 200  # the sign-in's own: as without it
    assert other.status_code == stranger.status_code == 403
    said = other.json()["error"]["data"]
    assert said["message"] == "this sign-in acts in organisation 2, not in organisation 1 (X-Organization-Id)"
    assert said["hint"] == ("Leave X-Organization-Id out to act in organisation 2, or sign in again and choose "
                            "organisation 1.")
    assert "not in organisation 7" in stranger.json()["error"]["message"]


@pytest.mark.anyio
async def test_a_default_repository_beside_a_sign_in_is_the_connections(server: HttpServer, sandbox: SandboxServer,
                                                                       flow: RawFlow) -> None:
    """X-Repo-Id is read with the caller a sign-in stands for, as beside a token."""
    token = flow.tokens(flow.register(), ALICE)["access_token"]
    async with tenant_client(server.url, authorization=f"Bearer {token}", x_repo_id="202") as client:
        told = client.instructions or ""
        run = await client.call_tool("create_agent_run", {"prompt": "On the chat's repository"})
    assert not run.is_error and sandbox.state.world.runs[run.structured_content["id"]].repo_id == 202
    assert "default repository is 202" in told and "set by X-Repo-Id" in told


def test_with_a_list_an_organisation_named_beside_a_sign_in_gets_the_tokens_refusal(sandbox: SandboxServer) -> None:
    """As docs/remote.md says: the refusal names the organisation and the reason, and the hint how to sign in."""
    listed = oauth_server(sandbox, AGENT_AUTOMATION_ALLOWED_ORGS="1")
    try:
        flow = RawFlow(listed.origin)
        token = flow.tokens(flow.register(), CAROL)["access_token"]  # Carol sees 1 and 2: only 1 is served
        refused = flow.mcp_status(token, x_organization_id="2")
        assert flow.mcp_status(token, x_organization_id="1").status_code == 200
    finally:
        listed.stop()
    said = refused.json()["error"]["data"]
    assert refused.status_code == 403 and said["message"] == "this server does not serve organisation 2"
    assert said["hint"] == "Sign in again and choose organisation 1: this token's organisations this server serves."


def test_a_refused_token_shows_the_page_again_and_deny_goes_back_with_access_denied(flow: RawFlow) -> None:
    client_id = flow.register()
    page = flow.consent_page(client_id, pkce()[1])
    again = flow.approve(page, "tok-nobody-knows")
    assert again.status_code == 400 and "refused this token" in again.text and "tok-nobody-knows" not in again.text
    denied = flow.http.post(f"{flow.origin}/authorize", data={**hidden_fields(again.text), "action": "deny"})
    assert denied.status_code == 303
    back = query_of(denied.headers["location"])
    assert denied.headers["location"].startswith(REDIRECT_URI)
    assert back["error"] == "access_denied" and back["state"] == "st-1" and back["iss"] == flow.origin + "/"


def test_the_consent_page_cannot_be_framed_loads_nothing_and_escapes_what_the_client_sent(flow: RawFlow) -> None:
    client_id = flow.register(client_name='<script>alert("x")</script>')
    page = flow.consent_page(client_id, pkce()[1])
    policy = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy and "form-action" not in policy
    assert "<script>" not in page.text and "&lt;script&gt;" in page.text
    assert "src=" not in page.text and "href=" not in page.text  # nothing loaded from elsewhere
    assert page.headers["cache-control"] == "no-store"


def test_a_wrong_pkce_verifier_gets_no_tokens(flow: RawFlow) -> None:
    client_id = flow.register()
    code, _ = flow.code(client_id, ALICE)
    answer = flow.exchange(client_id, code, pkce()[0])
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_grant"


def test_pkce_is_required(flow: RawFlow) -> None:
    client_id = flow.register()
    for params in ({"code_challenge": ""}, {"code_challenge_method": "plain"}):
        answer = flow.consent_page(client_id, pkce()[1], **params)
        assert answer.status_code == 303 and query_of(answer.headers["location"])["error"] == "invalid_request"


def test_a_code_used_twice_ends_the_sign_in_it_started(flow: RawFlow) -> None:
    client_id = flow.register()
    code, verifier = flow.code(client_id, ALICE)
    tokens = flow.exchange(client_id, code, verifier).json()
    assert flow.mcp_status(tokens["access_token"]).status_code == 200
    replay = flow.exchange(client_id, code, verifier)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert flow.mcp_status(tokens["access_token"]).status_code == 401


def test_an_unregistered_redirect_uri_or_unknown_client_gets_a_page_never_a_redirect(flow: RawFlow) -> None:
    client_id = flow.register()
    for client, params in ((client_id, {"redirect_uri": "https://attacker.example/cb"}), ("no-such-client", {}),
                           (client_id, {"redirect_uri": REDIRECT_URI + "/"})):
        answer = flow.consent_page(client, pkce()[1], **params)
        assert answer.status_code == 400 and "location" not in answer.headers
        assert answer.headers["content-type"].startswith("text/html")


def test_registration_refuses_redirect_uris_that_are_neither_https_nor_loopback(server: HttpServer) -> None:
    for uri in ("http://example.com/cb", "javascript:alert(1)", "https://example.com/cb#frag", "cursor://x"):
        answer = httpx2.post(f"{server.origin}/register", json={"redirect_uris": [uri]})
        assert answer.status_code == 400, uri


def test_a_token_for_another_resource_is_refused(flow: RawFlow) -> None:
    client_id = flow.register()
    answer = flow.consent_page(client_id, pkce()[1], resource="https://elsewhere.example/mcp")
    assert answer.status_code == 303 and query_of(answer.headers["location"])["error"] == "invalid_target"
    code, verifier = flow.code(client_id, ALICE)
    answer = flow.exchange(client_id, code, verifier, resource="https://elsewhere.example/mcp")
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_target"


def test_revoking_the_access_token_ends_the_refresh_token_too(flow: RawFlow) -> None:
    client_id = flow.register()
    tokens = flow.tokens(client_id, ALICE)
    assert flow.revoke(tokens["access_token"], client_id).status_code == 200
    assert flow.mcp_status(tokens["access_token"]).status_code == 401
    assert flow.refresh(client_id, tokens["refresh_token"]).json()["error"] == "invalid_grant"
    assert flow.revoke("aamcp_at_unknown", client_id).status_code == 200  # RFC 7009: unknown is no error


def test_a_refresh_token_retried_at_once_gets_the_same_pair_and_used_again_later_ends_the_whole_sign_in(
        flow: RawFlow) -> None:
    """A client whose refresh answer was lost sends it again: it gets the pair the first got (the sign-in ended
    before). A spent token presented after its pair was refreshed in turn is a copy someone else holds."""
    client_id = flow.register()
    first = flow.tokens(client_id, ALICE)
    second = flow.refresh(client_id, first["refresh_token"]).json()
    retried = flow.refresh(client_id, first["refresh_token"])
    assert retried.status_code == 200 and retried.json() == second
    assert flow.mcp_status(second["access_token"]).status_code == 200
    third = flow.refresh(client_id, second["refresh_token"]).json()
    replay = flow.refresh(client_id, first["refresh_token"])
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert flow.mcp_status(third["access_token"]).status_code == 401
    assert flow.refresh(client_id, third["refresh_token"]).json()["error"] == "invalid_grant"


def test_the_consent_form_needs_its_csrf_value_and_the_browser_that_fetched_it(server: HttpServer,
                                                                               flow: RawFlow) -> None:
    client_id = flow.register()
    page = flow.consent_page(client_id, pkce()[1])
    fields = hidden_fields(page.text)
    without = flow.http.post(f"{server.origin}/authorize", data={"request": fields["request"], "token": ALICE,
                                                                  "action": "approve"})
    assert without.status_code == 403 and "location" not in without.headers
    other_browser = httpx2.post(f"{server.origin}/authorize", data={**fields, "token": ALICE, "action": "approve"})
    assert other_browser.status_code == 403


def test_an_oversized_registration_gets_413(server: HttpServer) -> None:
    body = {"redirect_uris": [REDIRECT_URI], "client_name": "x" * (70 * 1024)}
    assert httpx2.post(f"{server.origin}/register", json=body).status_code == 413


def test_a_client_id_url_at_a_private_address_is_never_fetched(server: HttpServer, flow: RawFlow) -> None:
    for client_id in ("https://127.0.0.1:1/client.json", "https://10.0.0.1/client.json",
                      "https://localhost/client.json", "https://[::1]/client.json", "https://169.254.169.254/x"):
        answer = flow.consent_page(client_id, pkce()[1])
        assert answer.status_code == 400 and "not known" in answer.text and "location" not in answer.headers


def test_a_service_token_revoked_at_the_service_ends_the_sign_in(sandbox: SandboxServer, flow: RawFlow) -> None:
    client_id = flow.register()
    tokens = flow.tokens(client_id, DORA)
    user = sandbox.state.world.token_users.pop(DORA)  # the user revokes the token at the service
    try:
        refused = flow.mcp_status(tokens["access_token"])
        assert refused.status_code == 401 and "resource_metadata=" in refused.headers["www-authenticate"]
        assert flow.refresh(client_id, tokens["refresh_token"]).json()["error"] == "invalid_grant"
    finally:
        sandbox.state.world.token_users[DORA] = user


def test_a_failing_service_costs_one_check_per_pasted_token(server: HttpServer, sandbox: SandboxServer,
                                                           flow: RawFlow) -> None:
    """As at `/mcp`: a check the service does not answer is sent once, never again (it used to be three times)."""
    page = flow.consent_page(flow.register(), pkce()[1])
    failing = {"error_rate": 1.0, "operations": ["get_current_user"]}
    assert httpx2.put(f"{sandbox.url}/_sandbox/faults", json=failing, timeout=10).status_code == 200
    before = len(sandbox.state.request_log)
    try:
        again = flow.approve(page, DORA)
    finally:
        httpx2.put(f"{sandbox.url}/_sandbox/faults", json={}, timeout=10)
    assert again.status_code == 400 and "could not be asked about this token" in again.text
    assert [record.token_hash for record in sandbox.state.request_log[before:]] == [token_hash(DORA)]


def test_one_address_gets_a_budget_of_sign_ins(sandbox: SandboxServer) -> None:
    server = oauth_server(sandbox, AGENT_AUTOMATION_OAUTH_SIGNINS_PER_MINUTE="1")
    try:
        flow = RawFlow(server.origin)
        flow.tokens(flow.register(), ALICE)  # one sign-in fits
        answer = flow.http.post(f"{server.origin}/register", json={"redirect_uris": [REDIRECT_URI]})
        assert answer.status_code == 429 and answer.headers["retry-after"] == "60"
    finally:
        server.stop()


def test_a_sign_in_spends_no_check_of_strangers_tokens(sandbox: SandboxServer) -> None:
    """Its grant vouches for its Codegen token (checked at the consent page), so strangers who spent this address's
    budget for unknown tokens never lock a signed-in colleague out, even when the server has not seen the token."""
    server = oauth_server(sandbox, AGENT_AUTOMATION_TOKEN_CHECKS_PER_ADDRESS="2")
    try:
        flow = RawFlow(server.origin)
        tokens = flow.tokens(flow.register(), DORA)  # the consent page's check spends one, as /mcp's does
        assert flow.mcp_status("tok-stranger-1").status_code == 401  # the address's last check, spent
        assert flow.mcp_status("tok-stranger-2").status_code == 429
        assert flow.mcp_status(tokens["access_token"]).status_code == 200  # DORA's first check at /mcp
    finally:
        server.stop()


def test_the_same_consent_form_posted_twice_gives_one_code(flow: RawFlow) -> None:
    client_id = flow.register()
    page = flow.consent_page(client_id, pkce()[1])
    first, second = flow.approve(page, ALICE), flow.approve(page, ALICE)
    assert first.status_code == 303 and "code" in query_of(first.headers["location"])
    assert second.status_code == 400 and "was used already" in second.text and "location" not in second.headers


def test_an_app_returning_elsewhere_than_the_chat_apps_is_refused_and_with_any_host_allowed_it_is_warned_about(
        server: HttpServer, sandbox: SandboxServer) -> None:
    """Anyone may register an app named "Claude": by default it may send people back only to the chat apps' hosts
    (and this machine), so a stranger's copy gets no consent page of the company's."""
    body = {"redirect_uris": ["https://claude.evil.example/api/mcp/auth_callback"], "client_name": "Claude"}
    refused = httpx2.post(f"{server.origin}/register", json=body)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_redirect_uri"
    assert "claude.evil.example" in refused.json()["error_description"]
    real = httpx2.post(f"{server.origin}/register", json=body | {
        "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"]})
    assert real.status_code == 201
    page = RawFlow(server.origin).consent_page(real.json()["client_id"], pkce()[1],
                                               redirect_uri="https://claude.ai/api/mcp/auth_callback")
    assert page.status_code == 200 and "does not know" not in page.text
    anywhere = oauth_server(sandbox, AGENT_AUTOMATION_OAUTH_REDIRECT_HOSTS="*")
    try:
        flow = RawFlow(anywhere.origin)
        client_id = flow.http.post(f"{anywhere.origin}/register", json=body).json()["client_id"]
        warned = flow.consent_page(client_id, pkce()[1], redirect_uri=body["redirect_uris"][0])
        assert RawFlow(server.origin).consent_page(client_id, pkce()[1]).status_code == 400  # not known there
    finally:
        stderr = anywhere.stop()
    assert warned.status_code == 200 and "does not know <strong>claude.evil.example</strong>" in warned.text
    assert "AGENT_AUTOMATION_OAUTH_REDIRECT_HOSTS allows any host" in stderr
