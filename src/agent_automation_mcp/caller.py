"""Who an HTTP request is made for, resolved once at the edge and handed on as a value.

The gate (`remote/gate.py`) reads the bearer token and `X-Organization-Id` once, checks them (a sign-in's token of
ours stands for its grant: `remote/oauth/signin.py`), and puts the result in the request's ASGI state, where the
access line, the gate's later checks, confirmations and the tools all read it: nothing reads the bearer header
again, and nothing sits on the wrong side of a sign-in's hand-off. The state travels with the request into the MCP
SDK, whose request context holds the same Starlette request.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any, Final

from .api.credentials import Credentials

STATE_KEY: Final = "agent_automation.caller"  # where the caller sits in the request's ASGI state


@dataclass(frozen=True, slots=True)
class Caller:
    """The service token a request acts with (a sign-in's grant's, never our own token) and the organisation it acts
    in; whether a sign-in granted reading only; whether it came through a sign-in; the repository its runs start on
    when a call names none (X-Repo-Id)."""

    credentials: Credentials
    read_only: bool = False
    signed_in: bool = False
    repo_id: int | None = None

    @property
    def token_key(self) -> str:
        """The token's hash: what pacing, budgets, caches and (through `logs.tenant_id`) the log lines name."""
        return self.credentials.token_key


def hand_on(scope: MutableMapping[str, Any], caller: Caller) -> None:
    """The edge: `caller` is who this request is made for."""
    scope.setdefault("state", {})[STATE_KEY] = caller


def caller_in(scope: MutableMapping[str, Any] | None) -> Caller | None:
    """The caller the edge resolved for this ASGI scope; None before it did, or where it did not (`--auth env`)."""
    found = (scope or {}).get("state", {}).get(STATE_KEY)
    return found if isinstance(found, Caller) else None


def caller_of(request: Any) -> Caller | None:
    """The caller of the request an MCP SDK context holds (a Starlette request over HTTP; None on stdio)."""
    return caller_in(getattr(request, "scope", None))
