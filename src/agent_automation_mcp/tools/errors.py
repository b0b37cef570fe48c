"""The one error shape every failed tool call returns (and a refused task method holds).

`{"error": {"kind", "status", "message", "retry_after_seconds"?, "details"?, "hint"}}` as structured
content of an `isError` result, with the same facts on one line of text for clients that only show
text. The spec exempts error results from the tool's output schema (TypeScript SDK clients before its
fix for issue 1943 checked them anyway), so this shape can be shared by every tool. Nothing here formats
per tool.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
from collections.abc import Callable, Sequence
from typing import Any, Final

from mcp import MCPError
from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError

from ..api.client import AgentAutomationClient
from ..api.errors import ApiError, InvalidRequestError, NotFoundError, RateLimitError
from ..api.operations import OPERATIONS
from ..api.text import visible, visible_tree
from ..wording import listed
from .declarations import ToolSpec


class InternalError(ApiError):
    """A failure inside this server (a bug), reported in the same shape as every other failure."""

    kind = "internal_error"
    default_hint = ("A fault in agent-automation-mcp, not in the arguments; the server's log on stderr has the "
                    "details. Try again once; if it repeats, report it.")


class CancelledByUserError(ApiError):
    """The user declined or cancelled the confirmation a destructive tool asked for."""

    kind = "cancelled"
    default_hint = "The user did not confirm, so nothing was sent. Do not try again unless the user asks for it."


ASKED_CHARS: Final = 40  # a refused word longer than this is not quoted back
# The pydantic error type of a value asking for what the service cannot do (`missing_actions`): its context holds the
# refusal's hint, the closest thing that can be done.
MISSING_ERROR: Final = "service_cannot"
# JSON-RPC's implementation-defined range (429's digits): a protocol request refused, its `data` the one error shape.
REFUSED: Final = -32029
# A 404's hint names what lists valid ids, for each id the operation that answered it takes (`not_found_hint`).
ID_HINTS: Final = {
    "agent_run_id": "Check agent_run_id: list_agent_runs lists the runs (newest first) with their ids.",
    "repo_id": "Check repo_id: list_repositories lists the organisation's repositories with their ids.",
    "user_id": "Check user_id: list_users lists the organisation's users with their ids.",
    "sandbox_id": "Check sandbox_id: a repository's setup sandbox as the Codegen web app shows it, not an agent run "
                  "id; no tool lists sandboxes.",
}
NOT_FOUND_HINT: Final = ("Check the ids: list_organizations, list_repositories, list_users and list_agent_runs list "
                         "valid ones.")


@functools.cache
def not_found_hint(operation: str) -> str:
    """The hint of a 404 that `operation` answered: one sentence per id of `ID_HINTS` it takes (its path, its query
    and its client method's arguments, in that order), else the general one. Derived, so a new operation's ids get
    their hints without an entry."""
    op = OPERATIONS.get(operation)
    method = getattr(AgentAutomationClient, operation, None)
    arguments = list(inspect.signature(method).parameters)[1:] if method is not None else []
    ids = dict.fromkeys([*op.path_params, *op.query, *arguments]) if op is not None else {}
    return " ".join(ID_HINTS[name] for name in ids if name in ID_HINTS) or NOT_FOUND_HINT


def error_result(error: ApiError, fit: Callable[[str], str] | None = None,
                 tools: Sequence[ToolSpec] = ()) -> CallToolResult:
    """The result for `error`, its hint passed through `fit` (the server cuts it to the tools the request is offered:
    a hint that sends a model to a tool it cannot call leads it into a refusal); a rate limit's hint names which of
    the server's `tools` count against it."""
    body = _body(error, fit, tools)
    return CallToolResult(is_error=True, structured_content={"error": body},
                          content=[TextContent(type="text", text=_one_line(body))])


def protocol_error(error: ApiError) -> MCPError:
    """`error` answering a protocol request that has no tool result to hold it (a task method): a JSON-RPC error
    whose message is the one line a tool result's text would be, and whose `data` is the one error shape."""
    body = _body(error, None, ())
    return MCPError(code=REFUSED, message=_one_line(body), data={"error": body})


def _body(error: ApiError, fit: Callable[[str], str] | None, tools: Sequence[ToolSpec]) -> dict[str, Any]:
    if isinstance(error, NotFoundError) and error.hint == NotFoundError.default_hint:
        error.hint = not_found_hint(error.operation or "")
    hint = error.hint
    if isinstance(error, RateLimitError) and error.shared_by and tools:
        hint = f"{hint} {sharing(error.shared_by, tools)}"
    if fit is not None:
        hint = fit(hint) or type(error).default_hint
    body: dict[str, Any] = {"kind": error.kind, "status": error.status, "message": error.message}
    if error.retry_after is not None:
        body["retry_after_seconds"] = math.ceil(error.retry_after * 10) / 10
    if error.details is not None:
        body["details"] = error.details
    body["hint"] = hint
    return visible_tree(body)


def sharing(shared_by: dict[str, frozenset[str]], tools: Sequence[ToolSpec]) -> str:
    """Which of `tools` count against each limit (`RateLimitError.shared_by`: its operations): the other tools a
    refusal holds back too. Every tool counts against `standard`."""
    said = []
    for limit, operations in shared_by.items():
        counted = [spec.name for spec in tools if operations & set(spec.operations)]
        if len(counted) == len(tools):
            said.append(f"Every tool counts against {limit}.")
        elif len(counted) == 1:
            said.append(f"{counted[0]} alone counts against {limit}.")
        elif counted:
            said.append(f"{listed(counted)} count against {limit}.")
    return " ".join(said)


def argument_error(tool: str, exc: ValidationError) -> ApiError:
    """Arguments the tool's schema refuses, reported like the client's own pre-send checks (nothing was sent): each
    refused word named as asked (`state: asked "merge"`); a value asking for what the service cannot do
    (`missing_actions`) with the closest thing as the hint, not "fix the arguments" (the nearest valid word may do
    something else: closed is not merged)."""
    errors = exc.errors(include_url=False)
    details = [{"loc": [str(part) for part in e["loc"]], "msg": _asked(e), "type": e["type"]} for e in errors]
    problems = "; ".join(f"{'.'.join(d['loc']) or 'arguments'}: {d['msg']}" for d in details)
    hint = next((str(e["ctx"]["hint"]) for e in errors if e["type"] == MISSING_ERROR), None)
    return InvalidRequestError(f"{tool}: {problems}", details=details, operation=tool, hint=hint)


def _asked(error: Any) -> str:
    """A refusal of a word not among the allowed ones says the word asked (short, visible); no other input is quoted
    (it could be long, or a secret)."""
    value = error.get("input")
    if error["type"] in ("literal_error", "enum") and isinstance(value, str) and len(value) <= ASKED_CHARS:
        return f"asked {json.dumps(visible(value), ensure_ascii=False)}: {error['msg']}"
    return str(error["msg"])


def unknown_arguments(tool: str, unknown: list[str], accepted: frozenset[str]) -> ApiError:
    details = [{"loc": [name], "msg": "unknown argument", "type": "extra_forbidden"} for name in unknown]
    return InvalidRequestError(f"{tool}: unknown argument(s) {', '.join(unknown)}; it takes "
                               f"{', '.join(sorted(accepted)) or 'no arguments'}", details=details, operation=tool)


def _one_line(body: dict[str, Any]) -> str:
    status = f" (HTTP {body['status']})" if body["status"] is not None else ""
    retry = f" Retry after {body['retry_after_seconds']:g} s." if "retry_after_seconds" in body else ""
    message = str(body["message"]).rstrip(". ")
    return " ".join(f"Error [{body['kind']}]{status}: {message}.{retry} {body['hint']}".split())
