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
from collections.abc import Mapping
from typing import Any, Final

from starlette.types import Send

Refused = tuple[int, dict[str, Any], Mapping[str, str]]

# JSON-RPC codes by HTTP status: the implementation-defined server range (-32000 to -32099), except a malformed
# request, which JSON-RPC names itself.
RPC_CODES: Final[Mapping[int, int]] = {400: -32600, 401: -32001, 403: -32003, 405: -32005, 408: -32008,
                                       421: -32021, 429: -32029, 502: -32052, 503: -32053}


def error_body(kind: str, status: int, message: str, hint: str, *,
               retry_after: int | None = None) -> dict[str, Any]:
    shape: dict[str, Any] = {"kind": kind, "status": status, "message": message}
    if retry_after is not None:
        shape["retry_after_seconds"] = retry_after
    shape["hint"] = hint
    shown = f"{message[:1].upper()}{message[1:]}. {hint}"
    if retry_after is not None:
        shown += f" (Retry after {retry_after} s.)"
    # id null: refused before the body was read; the SDK clients answer the request they sent with it.
    return {"jsonrpc": "2.0", "id": None,
            "error": {"code": RPC_CODES.get(status, -32000), **shape, "message": shown, "data": shape}}


async def respond(send: Send, refused: Refused) -> None:
    status, body, headers = refused
    payload = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
           *((name.lower().encode(), value.encode()) for name, value in headers.items())]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})
