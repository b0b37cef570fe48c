"""Asking the user before a destructive tool acts, when the client can ask (MCP form elicitation).

Each destructive tool takes a parameter `Annotated[Answer, Resolve(question)]`: the SDK runs `question`
(with the tool's arguments) before the tool body, asks the user in either protocol era (a request mid-call
up to 2025-11-25, an `InputRequiredResult` round from 2026-07-28), and hands the tool the answer. A client
that cannot ask gets no question: it behaves as it did before confirmations existed.

From 2026-07-28 the answer comes back in a new request, which a load balancer may send to another replica; the
SDK seals what it needs across the round (`requestState`) and `continuation_security` says with which keys: the
operator's `AGENT_AUTOMATION_STATE_KEYS`, shared by every replica, or one this process draws (a lone replica).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Final

from mcp.server.context import ServerRequestContext
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import Elicit
from mcp.server.request_state import RequestStateSecurity
from pydantic import BaseModel, Field

from .. import tracing
from ..caller import caller_of
from .errors import CancelledByUserError

ANSWER_SECONDS: Final = 600.0  # how long a question stays answerable: a person may step away before confirming


class Confirmation(BaseModel):
    confirm: bool = Field(description="Go ahead?")


Answer = ElicitationResult[Confirmation]
Question = Elicit[Confirmation] | Confirmation
_NOT_ASKED = Confirmation(confirm=True)  # what a client that cannot ask gets: today's behaviour


def ask(ctx: Context[Any, Any], what_happens: str) -> Question:
    """The question for a client that declared form elicitation; no question for one that did not."""
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None or (elicitation.form is None and elicitation.url is not None):
        return _NOT_ASKED
    return Elicit(f"{what_happens} Go ahead?", Confirmation)


def require_confirmation(answer: Answer, tool: str) -> None:
    """Return if the user confirmed (or could not be asked); otherwise raise `cancelled`, before any request."""
    if isinstance(answer, AcceptedElicitation) and answer.data.confirm:
        confirmed, how = True, "not asked" if answer.data is _NOT_ASKED else "confirmed"  # the SDK hands ours back
    else:
        confirmed = False
        how = "declined" if isinstance(answer, AcceptedElicitation) or answer.action == "decline" else "cancelled"
    with tracing.span("confirmation", {"gen_ai.tool.name": tool, "agent_automation.confirmation.answer": how}):
        if not confirmed:
            raise CancelledByUserError(f"{tool}: the user {how} the confirmation; nothing was sent", operation=tool)


def continuation_security(keys: Sequence[str]) -> RequestStateSecurity:
    """How a question's continuation is sealed: `keys[0]` seals and every key opens (rotation), so any replica
    holding the same keys continues the call; without keys, a key of this process only (today's one replica).
    A continuation opens only for the token that started the call."""
    ring: list[str | bytes] = list(keys) or [os.urandom(32)]
    return RequestStateSecurity(keys=ring, ttl=ANSWER_SECONDS, bind_principal=principal)


def principal(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The request's token (a sign-in's service token), by its hash: a continuation must come from whoever was
    asked; None without one (stdio, or HTTP with the operator's token for everyone)."""
    caller = caller_of(ctx.request)
    return caller.token_key if caller is not None else None
