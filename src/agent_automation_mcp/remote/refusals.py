"""What a request refused before any tool runs is answered: its HTTP status, a body and headers. The gate and the
sign-in's check of our access tokens both answer this way, so a client reads every refusal alike.

The body is a JSON-RPC error response (`{"jsonrpc": "2.0", "id": null, "error": {"code", "message", "data"}}`):
the SDK clients (Python and TypeScript) show a JSON-RPC error's `message` at any HTTP status, and for any other
body only "Server returned an error response". So `message` is the whole sentence a person needs (what happened,
what to do, when to try again), and the one error shape's fields (`kind`, `status`, `message`, `hint`,
`retry_after_seconds`?) stay readable by programs, in `data` and beside `code` and `message`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from starlette.types import Send


class Refused(NamedTuple):
    status: int
    body: dict[str, Any]
    headers: Mapping[str, str]


# By HTTP status: the one error shape's `kind`, and the JSON-RPC code (the implementation-defined server range,
# -32000 to -32099, except a malformed request, which JSON-RPC names itself).
STATUSES: Final[Mapping[int, tuple[str, int]]] = {
    400: ("bad_request", -32600), 401: ("unauthorized", -32001), 403: ("forbidden", -32003),
    405: ("method_not_allowed", -32005), 408: ("timeout", -32008), 421: ("misdirected", -32021),
    429: ("rate_limited", -32029), 502: ("unavailable", -32052), 503: ("unavailable", -32053)}


def refusal(status: int, message: str, hint: str, *, retry_after: int | None = None,
            headers: Mapping[str, str] | None = None) -> Refused:
    """The answer to a refused request; `retry_after` is said in the body and in a `Retry-After` header alike."""
    kind, code = STATUSES[status]
    shape: dict[str, Any] = {"kind": kind, "status": status, "message": message}
    if retry_after is not None:
        shape["retry_after_seconds"] = retry_after
    shape["hint"] = hint
    shown = f"{as_sentence(message)}. {hint}"
    if retry_after is not None:
        shown += f" (Retry after {retry_after} s.)"
    # id null: refused before the body was read; the SDK clients answer the request they sent with it.
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, **shape, "message": shown, "data": shape}}
    waiting = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return Refused(status, body, {**waiting, **(headers or {})})


_PLAIN_WORD: Final = re.compile(r"[a-z]+(?:-[a-z]+)*(?![\w.])")


def as_sentence(message: str) -> str:
    """`message` as a sentence's start: a plain first word capitalised (`this token…` → `This token…`), a name left as
    it is spelt (`create_agent_run changes things`: `Create_agent_run` names no tool)."""
    return f"{message[:1].upper()}{message[1:]}" if _PLAIN_WORD.match(message) else message


async def respond(send: Send, refused: Refused) -> None:
    status, body, headers = refused
    payload = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
           *((name.lower().encode(), value.encode()) for name, value in headers.items())]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})
