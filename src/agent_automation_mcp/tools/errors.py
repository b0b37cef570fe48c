"""The one error shape every failed tool call returns.

`{"error": {"kind", "status", "message", "retry_after_seconds"?, "details"?, "hint"}}` as structured
content of an `isError` result, with the same facts on one line of text for clients that only show
text. The spec exempts error results from the tool's output schema (TypeScript SDK clients before its
fix for issue 1943 checked them anyway), so this shape can be shared by every tool. Nothing here formats
per tool.
"""

from __future__ import annotations

import math
from typing import Any

from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError

from ..api.errors import ApiError, InvalidRequestError
from ..api.text import visible_tree


class InternalError(ApiError):
    """A failure inside this server (a bug), reported in the same shape as every other failure."""

    kind = "internal_error"
    default_hint = ("A fault in agent-automation-mcp, not in the arguments; the server's log on stderr has the "
                    "details. Try again once; if it repeats, report it.")


class CancelledByUserError(ApiError):
    """The user declined or cancelled the confirmation a destructive tool asked for."""

    kind = "cancelled"
    default_hint = "The user did not confirm, so nothing was sent. Do not try again unless the user asks for it."


def error_result(error: ApiError) -> CallToolResult:
    body: dict[str, Any] = {"kind": error.kind, "status": error.status, "message": error.message}
    if error.retry_after is not None:
        body["retry_after_seconds"] = math.ceil(error.retry_after * 10) / 10
    if error.details is not None:
        body["details"] = error.details
    body["hint"] = error.hint
    body = visible_tree(body)
    return CallToolResult(is_error=True, structured_content={"error": body},
                          content=[TextContent(type="text", text=_one_line(body))])


def argument_error(tool: str, exc: ValidationError) -> ApiError:
    """Arguments the tool's schema refuses, reported like the client's own pre-send checks (nothing was sent)."""
    details = [{"loc": [str(part) for part in e["loc"]], "msg": e["msg"], "type": e["type"]}
               for e in exc.errors(include_url=False, include_input=False, include_context=False)]
    problems = "; ".join(f"{'.'.join(d['loc']) or 'arguments'}: {d['msg']}" for d in details)
    return InvalidRequestError(f"{tool}: {problems}", details=details, operation=tool)


def unknown_arguments(tool: str, unknown: list[str], accepted: frozenset[str]) -> ApiError:
    details = [{"loc": [name], "msg": "unknown argument", "type": "extra_forbidden"} for name in unknown]
    return InvalidRequestError(f"{tool}: unknown argument(s) {', '.join(unknown)}; it takes "
                               f"{', '.join(sorted(accepted)) or 'no arguments'}", details=details, operation=tool)


def _one_line(body: dict[str, Any]) -> str:
    status = f" (HTTP {body['status']})" if body["status"] is not None else ""
    retry = f" Retry after {body['retry_after_seconds']:g} s." if "retry_after_seconds" in body else ""
    message = str(body["message"]).rstrip(". ")
    return " ".join(f"Error [{body['kind']}]{status}: {message}.{retry} {body['hint']}".split())
