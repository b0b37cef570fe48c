"""A `/mcp` POST's body, read once for every layer in front of the MCP SDK: the access line, the caller's trace
context and the gate all look at the same parsed JSON-RPC message, and the SDK is handed the same bytes.

The body is the one source of what a request asks: the `Mcp-Method`/`Mcp-Name` headers of the 2026-07-28 era are
checked against it by the SDK, but a 2025-11-25 request's headers are checked by nobody, so they are never read
here. Reading has a deadline (`BODY_SECONDS`): a client that sends its body slowly, or never finishes it, is answered
408 and its connection closed. It is read before the gate counts the request in flight, so a drain never waits for
it. Past `max_bytes` nothing more is read or parsed: the SDK answers 413.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import anyio
from starlette.types import Message, Receive, Scope

from .refusals import Refused, refusal

BODY_SECONDS: Final = 10.0  # as for the headers (header_deadline.py): a real client sends its body at once
MAX_METHOD_CHARS: Final = 64  # the longest MCP method is 38; a method or name is quoted at most this long
MAX_ID_CHARS: Final = 128  # a JSON-RPC id, as text: a number, a UUID (36) or a short string
STATE_KEY: Final = "agent_automation.rpc_request"  # where the read request sits in the ASGI scope's state
UNREADABLE: Final = object()  # a body that is not JSON, or is nested past the parser's depth
BODY_TOO_SLOW: Final[Refused] = refusal(
    408, f"the request's body did not arrive within {BODY_SECONDS:g} s of its headers; nothing was done",
    "Send the whole request at once.", headers={"Connection": "close"})


@dataclass(frozen=True, slots=True)
class RpcRequest:
    """What a POST's body says, parsed once: `message` is the JSON value, `UNREADABLE`, or None (no body, or one
    past the size cap, which the SDK refuses)."""

    message: Any

    @classmethod
    def parse(cls, body: bytes) -> RpcRequest:
        if not body:
            return cls(None)
        try:
            return cls(json.loads(body))
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth (`[[[[...`)
            return cls(UNREADABLE)

    @property
    def _single(self) -> Mapping[str, Any]:
        return self.message if isinstance(self.message, dict) else {}

    @property
    def _params(self) -> Mapping[str, Any]:
        params = self._single.get("params")
        return params if isinstance(params, dict) else {}

    @property
    def method(self) -> str | None:
        method = self._single.get("method")
        return method if isinstance(method, str) else None

    @property
    def name(self) -> str | None:
        """`params.name`: the tool of a `tools/call`, the prompt of a `prompts/get`."""
        name = self._params.get("name")
        return name if isinstance(name, str) else None

    @property
    def called_tool(self) -> str | None:
        return self.name if self.method == "tools/call" else None

    @property
    def meta(self) -> Mapping[str, Any] | None:
        meta = self._params.get("_meta")
        return meta if isinstance(meta, dict) else None

    def quoted(self) -> tuple[str | None, str | None]:
        """The method and, for a tool call, the tool, as a log line quotes them (cut short)."""
        if self.message is None:
            return None, None
        if self.message is UNREADABLE or not isinstance(self.message, dict | list):
            return "unreadable", None
        if isinstance(self.message, list):
            return "batch", None
        method = self._single.get("method")
        tool = self.called_tool
        return (str(method)[:MAX_METHOD_CHARS] if method is not None else "response",
                tool[:MAX_METHOD_CHARS] if tool is not None else None)

    def overlong(self, longest_name: int) -> tuple[str, str] | None:
        """What is longer than anything this server knows (a method, a tool's or prompt's name, an id), and what
        to send instead; None when nothing is. Refused before the SDK sees it, since the SDK names its span and
        its error after the method and the name and records the id as they come."""
        request = self._single
        method = request.get("method")
        if isinstance(method, str) and len(method) > MAX_METHOD_CHARS:
            return (f"the JSON-RPC method is {len(method):,} characters long; no MCP method is longer than "
                    f"{MAX_METHOD_CHARS}", "Send a method MCP defines (tools/call, tools/list, ...).")
        name = self.name
        if name is not None and len(name) > longest_name:
            what = "the tool name" if method == "tools/call" else "params.name"
            return (f"{what} is {len(name):,} characters long; no tool or prompt of this server has a name "
                    f"longer than {longest_name}", "Call tools/list (or prompts/list) for the names this server has.")
        rid = request.get("id")
        if rid is not None and len(str(rid)) > MAX_ID_CHARS:
            return (f"the JSON-RPC id is {len(str(rid)):,} characters long; this server takes ids of at most "
                    f"{MAX_ID_CHARS}", "Send a number or a short string as the request's id.")
        return None


def read_request(scope: Scope) -> RpcRequest | None:
    """The request `read_body` read for this scope, or None (not a POST, or not read)."""
    found = scope.get("state", {}).get(STATE_KEY)
    return found if isinstance(found, RpcRequest) else None


async def read_body(scope: Scope, receive: Receive, max_bytes: int) -> Receive | None:
    """Read a POST's body within `BODY_SECONDS`, parse it (`read_request` has it then) and return a `receive` that
    hands the app the same messages; None when the body did not arrive in time."""
    read: list[Message] = []
    size = 0
    with anyio.move_on_after(BODY_SECONDS):
        while size <= max_bytes:
            message = await receive()
            read.append(message)
            size += len(message.get("body", b""))
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        else:  # past the cap: the SDK answers 413 from what was read, without reading on
            scope.setdefault("state", {})[STATE_KEY] = RpcRequest(None)
            return _replaying(read, receive)
        body = b"".join(message.get("body", b"") for message in read)
        scope.setdefault("state", {})[STATE_KEY] = RpcRequest.parse(body)
        return _replaying(read, receive)
    return None


def _replaying(read: list[Message], receive: Receive) -> Receive:
    pending = iter(read)

    async def replaying() -> Message:
        return next(pending, None) or await receive()

    return replaying
