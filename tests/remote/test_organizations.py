"""Which requests an allowed-organisations list lets through, once the token's verdict is known (or is not)."""

from __future__ import annotations

from typing import Any

import pytest

from agent_automation_mcp.api import AgentAutomationClient, ApiTransport, Credentials
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.remote.organizations import (
    UNDECIDED_RETRY_SECONDS,
    AllowedOrganizations,
    acting_in,
    named_beside_sign_in,
    served_organization,
)
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer


def _decide(served: tuple[int, ...] | None, allowed: tuple[int, ...], named: str | None = None) -> tuple[Any, Any]:
    """The refusal, or None and the organisation the request acts in."""
    chosen = int(named) if named is not None else None
    return served_organization(chosen, served, AllowedOrganizations.of(allowed)), acting_in(chosen, served)


def test_without_a_list_every_token_goes_on_as_it_came() -> None:
    assert _decide(None, ()) == (None, None)
    assert _decide(None, (), named="7") == (None, 7)


def test_with_a_list_an_undecided_token_is_refused_for_now_not_served_and_not_sent_again_by_a_balancer() -> None:
    refusal, _ = _decide(None, (1,))  # the service could not answer the check
    assert refusal is not None
    status, body, headers = refusal
    assert status == 502  # the shipped balancers send only 503s (a draining replica's) to another replica
    assert body["error"]["kind"] == "unavailable" and headers == {"Retry-After": str(UNDECIDED_RETRY_SECONDS)}


def test_with_a_list_tokens_and_named_organisations_outside_it_are_refused() -> None:
    assert _decide((), (1,))[0][0] == 403
    assert _decide((1,), (1, 2), named="2")[0][0] == 403


def test_a_token_with_one_served_organisation_goes_on_in_it() -> None:
    assert _decide((1,), (1, 2)) == (None, 1)
    assert _decide((1, 2), (1, 2)) == (None, None)  # two: the tool asks which


def test_a_refusal_names_the_organisation_asked_for_the_real_reason_and_what_to_send() -> None:
    """Served: 1 and 3 of the list (1, 2, 3, 5); the token belongs to 1, 3 and others."""
    refusals = {named: _decide((1, 3), (1, 2, 3, 5), named=named)[0] for named in ("2", "7")}
    alone = _decide((1,), (1, 2), named="2")[0]
    errors = {named: refusal[1]["error"]["data"] for named, refusal in refusals.items()}
    assert errors["2"]["message"] == "this API token does not belong to organisation 2"  # served here, not the token's
    assert errors["7"]["message"] == "this server does not serve organisation 7"
    assert all(error["hint"] == "Send X-Organization-Id with one of 1, 3: this token's organisations that this "
                                "server serves." for error in errors.values())
    assert alone[1]["error"]["data"]["hint"].endswith("or leave the header out to act in it.")
    assert "5" not in str(refusals)  # the rest of the list is not the token's business
    none = _decide((), (1,))[0]
    assert "belongs to none of the organisations" in none[1]["error"]["data"]["message"]


def test_a_sign_ins_organisation_no_longer_served_is_told_to_sign_in_again() -> None:
    refusal = served_organization(2, (1,), AllowedOrganizations.of((1,)), signed_in=True)
    assert refusal is not None
    error = refusal[1]["error"]["data"]
    assert error["message"] == "this server does not serve organisation 2"
    assert error["hint"] == "Sign in again and choose organisation 1: this token's organisations this server serves."


def test_an_organisation_named_beside_a_sign_in_is_refused_unless_it_is_the_sign_ins() -> None:
    """The sign-in's organisation (2) stands in for the header; naming another is refused, as for a token."""
    everyone, listed = AllowedOrganizations.of(()), AllowedOrganizations.of((1, 2))
    assert named_beside_sign_in(None, 2, None, everyone) is None and named_beside_sign_in(2, 2, (1, 2), listed) is None
    assert named_beside_sign_in(5, 2, (), listed) is None  # the token sees none served: refused for that, later
    elsewhere = named_beside_sign_in(1, 2, None, everyone)
    not_served = named_beside_sign_in(3, 2, (1, 2), listed)
    assert elsewhere is not None and not_served is not None and elsewhere[0] == not_served[0] == 403
    assert elsewhere[1]["error"]["data"]["message"] == ("this sign-in acts in organisation 2, not in organisation 1 "
                                                        "(X-Organization-Id)")
    assert not_served[1]["error"]["data"]["message"] == "this server does not serve organisation 3"
    assert not_served[1]["error"]["data"]["hint"].startswith("Sign in again and choose one of 1, 2")


@pytest.mark.anyio
async def test_a_tokens_served_organisations_are_those_it_sees_that_the_list_allows() -> None:
    alice, carol = "tok-alice-org1", "tok-carol-both"
    config = SandboxConfig(tokens=(alice, carol), visible_orgs=2, token_orgs={alice: (1,)})
    with SandboxServer(config) as sandbox:
        async with ApiTransport(ApiSettings(token=alice, base_url=sandbox.url, timeout=5.0)) as transport:
            async def served(token: str, allowed: tuple[int, ...]) -> tuple[bool, list[int]]:
                found = await AllowedOrganizations.of(allowed).of_token(AgentAutomationClient(
                    transport, Credentials(token)).within(10))
                return found.seen, [org.id for org in found.served]

            assert await served(carol, ()) == (True, [1, 2])  # no list: every organisation it sees
            assert await served(carol, (2, 3)) == (True, [2])
            assert await served(alice, (2,)) == (True, [])  # it sees one, which this server does not serve
