"""A request's body, read within a deadline and, for `/mcp`, under the replica's bound on body bytes held at once.

Only a request whose caller is known has its `/mcp` body read (`remote/gate.py`): a stranger's is never read, and
costs the replica no more than what uvicorn buffers of it per connection (64 KiB) while the gate answers. What is
read is held until the request ends, since the MCP SDK copies and parses it meanwhile, and counts against
`BodyBytes`: a body that would take the replica past it is refused 503 (nothing was done; a balancer may send it to
another replica), so however many callers send large bodies at once, a replica holds a bounded number of their bytes.

Reading has a deadline (`BODY_SECONDS`), on every endpoint that reads a body (the sign-in ones too, `read_within`):
a client that sends its body slowly, or never finishes it, is answered 408 and its connection closed. Past the size
cap nothing more is read: `/mcp`'s is the SDK's to refuse (413), the sign-in endpoints answer 413 themselves.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

import anyio
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .access import note_reason
from .refusals import Refused, refusal, respond

BODY_SECONDS: Final = 10.0  # as for the headers (deadlines.py): a real client sends its body at once
BODY_TOO_SLOW: Final[Refused] = refusal(
    408, f"the request's body did not arrive within {BODY_SECONDS:g} s of its headers; nothing was done",
    "Send the whole request at once.", headers={"Connection": "close"})
BODIES_HELD: Final = "bodies_held"  # the refusal's reason: the replica holds as many body bytes as it takes
BODIES_FULL: Final[Refused] = refusal(
    503, "this replica holds as many request bodies as it takes just now; nothing was done", "Send the request "
    "again: another replica, or this one in a moment, will take it.", retry_after=1, headers={"Connection": "close"})


class BodyBytes:
    """The body bytes this replica's requests hold at once, at most `limit`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def take(self, size: int) -> bool:
        if self.held + size > self.limit:
            return False
        self.held += size
        return True

    def give_back(self, size: int) -> None:
        self.held -= size


@dataclass(frozen=True, slots=True)
class Body:
    """A body read: its bytes (None past the size cap: only what was read, for the SDK to refuse), a `receive` that
    hands the app the same, and the bytes it holds of the replica's bound until the request ends."""

    content: bytes | None
    receive: Receive
    held: int


async def read_body(scope: Scope, receive: Receive, max_bytes: int, held: BodyBytes | None = None) -> Body | Refused:
    """The body, read within `BODY_SECONDS` and within `held`; the refusal when it is too slow or does not fit."""
    if _declared(scope) > max_bytes:  # refused before a byte is read
        return Body(None, receive, 0)
    read: list[Message] = []
    size = 0
    with anyio.move_on_after(BODY_SECONDS):
        while size <= max_bytes:
            message = await receive()
            part = len(message.get("body", b""))
            if held is not None and not held.take(part):
                held.give_back(size)
                note_reason(BODIES_HELD)
                return BODIES_FULL
            read.append(message)
            size += part
            if message["type"] != "http.request" or not message.get("more_body"):
                content = b"".join(message.get("body", b"") for message in read)  # then held once, not twice
                return Body(content, _replaying([{"type": "http.request", "body": content}], receive), size)
        return Body(None, _replaying(read, receive), size)  # past the cap: refused, reading no more
    if held is not None:
        held.give_back(size)
    return BODY_TOO_SLOW


def _declared(scope: Scope) -> int:
    """The body's Content-Length, or 0 when it says none (or nothing readable)."""
    value = next((value for name, value in scope.get("headers", ()) if name == b"content-length"), b"")
    return int(value) if value.isdigit() else 0


def _replaying(read: Iterable[Message], receive: Receive) -> Receive:
    pending = iter(read)

    async def replaying() -> Message:
        return next(pending, None) or await receive()

    return replaying


def read_within(app: ASGIApp, max_bytes: int) -> ASGIApp:
    """`app` handed its request's body whole, once it arrived within `BODY_SECONDS` (else 408) and within
    `max_bytes` (else 413): the sign-in endpoints' bodies, small and anonymous by nature."""
    async def bounded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        body = await read_body(scope, receive, max_bytes)
        if isinstance(body, Refused):
            await respond(send, body)
        elif body.content is None:
            await PlainTextResponse("Request body too large", status_code=413)(scope, receive, send)
        else:
            await app(scope, body.receive, send)

    return bounded
