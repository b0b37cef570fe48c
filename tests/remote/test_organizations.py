"""Which requests an allowed-organisations list lets through, once the token's verdict is known (or is not)."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import Headers

from agent_automation_mcp.remote.organizations import (
    UNDECIDED_RETRY_SECONDS,
    AllowedOrganizations,
    served_organization,
)


def _decide(served: tuple[int, ...] | None, allowed: tuple[int, ...], named: str | None = None) -> tuple[Any, Any]:
    scope: dict[str, Any] = {"type": "http", "headers": [(b"x-organization-id", named.encode())] if named else []}
    return served_organization(scope, Headers(scope=scope), served, AllowedOrganizations.of(allowed)), scope


def test_without_a_list_every_token_goes_on_as_it_came() -> None:
    refusal, scope = _decide(None, ())
    assert refusal is None and scope["headers"] == []


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
    refusal, scope = _decide((1,), (1, 2))
    assert refusal is None and scope["headers"] == [(b"x-organization-id", b"1")]
