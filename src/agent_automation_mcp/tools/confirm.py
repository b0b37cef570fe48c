"""Asking the user before a destructive tool acts, when the client can ask (MCP form elicitation).

Each destructive tool takes a parameter `Annotated[Answer, Resolve(question)]`: the SDK runs `question`
(with the tool's arguments) before the tool body, asks the user in either protocol era (a request mid-call
up to 2025-11-25, an `InputRequiredResult` round from 2026-07-28), and hands the tool the answer. A client
that cannot ask gets no question: it behaves as it did before confirmations existed.
"""

from __future__ import annotations

from typing import Any

from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import Elicit
from pydantic import BaseModel, Field

from .errors import CancelledByUserError


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
        return
    how = "declined" if isinstance(answer, AcceptedElicitation) or answer.action == "decline" else "cancelled"
    raise CancelledByUserError(f"{tool}: the user {how} the confirmation; nothing was sent", operation=tool)
