"""What a `/mcp` POST's body asks, read once for every layer in front of the MCP SDK: the gate's checks, the
caller's trace context and the access line all look at the same few members, and the SDK is handed the same bytes.

The body is the one source of what a request asks: the `Mcp-Method`/`Mcp-Name` headers of the 2026-07-28 era are
checked against it by the SDK, but a 2025-11-25 request's headers are checked by nobody, so they are never read
here. The members are read by a bounded parser (`json_scan.py`): the method, `params.name`, the id and the trace
context in `params._meta`, each string kept at most `KEPT_CHARS` long beside its length. Nothing else of the body
is built, so whatever it holds it costs no more than its bytes, and the SDK parses it once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from starlette.types import Scope

from .json_scan import Member, Scan, TooIntricate, Unreadable, text

MAX_METHOD_CHARS: Final = 64  # the longest MCP method is 38; a method or name is quoted at most this long
MAX_ID_CHARS: Final = 128  # a JSON-RPC id, as text: a number, a UUID (36) or a short string
KEPT_CHARS: Final = 2 * MAX_METHOD_CHARS  # of a method or name: past this only its length is needed
MAX_TRACE_CHARS: Final = 512  # a W3C tracestate's bound (a traceparent is 55)
MAX_STEPS: Final = 20_000  # of the bounded parser: no MCP client's body takes a hundredth
STATE_KEY: Final = "agent_automation.rpc_request"  # where the read request sits in the ASGI scope's state
ENVELOPE: Final = frozenset({"method", "id", "params"})
PARAMS: Final = frozenset({"name", "_meta"})
TRACE: Final = frozenset({"traceparent", "tracestate"})
NONE, MESSAGE, BATCH, UNREADABLE, INTRICATE = "none", "message", "batch", "unreadable", "intricate"


class Text(NamedTuple):
    """A string member as kept: at most KEPT_CHARS of it, and its length."""

    kept: str
    chars: int


@dataclass(frozen=True, slots=True)
class RpcRequest:
    """What a POST's body says: its `kind` (`none` for no body, `message` for an object, `batch` for an array,
    `unreadable`, or `intricate` past the parser's steps) and, for a message, its few members."""

    kind: str = NONE
    method: str | None = None  # cut to KEPT_CHARS; `method_chars` is its length
    method_chars: int = 0
    name: str | None = None  # `params.name`: the tool of a `tools/call`, the prompt of a `prompts/get`
    name_chars: int = 0
    id_chars: int = 0  # the id's length as text; 0 without one
    trace: Mapping[str, str] = field(default_factory=dict)  # `params._meta`'s traceparent and tracestate

    @classmethod
    def read(cls, body: bytes) -> RpcRequest:
        scan = Scan(body, MAX_STEPS)
        at = scan.start()
        if at == len(body):
            return cls()
        if body[at] == ord("["):
            return cls(BATCH)
        try:
            return cls._message(scan, at)
        except TooIntricate:
            return cls(INTRICATE)
        except Unreadable:
            return cls(UNREADABLE)

    @classmethod
    def _message(cls, scan: Scan, at: int) -> RpcRequest:
        method: Text | None = None
        name: Text | None = None
        id_chars = 0
        trace: Mapping[str, str] = {}
        for member in scan.members(at, ENVELOPE):  # a repeated member: the last one counts, as for the SDK
            if member.key == "method":
                method = _kept(scan, member)
            elif member.key == "id":
                value = text(scan.body, member.start, member.end)
                id_chars = len(value) if value is not None else member.end - member.start
            else:
                name, trace = _params(scan, member)
        (method_kept, method_chars), (name_kept, name_chars) = method or (None, 0), name or (None, 0)
        return cls(MESSAGE, method_kept, method_chars, name_kept, name_chars, id_chars, trace)

    @property
    def called_tool(self) -> str | None:
        return self.name if self.method == "tools/call" else None

    def quoted(self) -> tuple[str | None, str | None]:
        """The method and, for a tool call, the tool, as a log line quotes them (cut short)."""
        if self.kind in (NONE, BATCH):
            return (None if self.kind == NONE else BATCH), None
        if self.kind != MESSAGE:
            return UNREADABLE, None
        tool = self.called_tool
        return (self.method[:MAX_METHOD_CHARS] if self.method is not None else "response",
                tool[:MAX_METHOD_CHARS] if tool is not None else None)

    def overlong(self, longest_name: int) -> tuple[str, str] | None:
        """What is longer than anything this server knows (a method, a tool's or prompt's name, an id), and what
        to send instead; None when nothing is. Refused before the SDK sees it, since the SDK names its span and
        its error after the method and the name and records the id as they come."""
        if self.method_chars > MAX_METHOD_CHARS:
            return (f"the JSON-RPC method is {self.method_chars:,} characters long; no MCP method is longer than "
                    f"{MAX_METHOD_CHARS}", "Send a method MCP defines (tools/call, tools/list, ...).")
        if self.name is not None and self.name_chars > longest_name:
            what = "the tool name" if self.method == "tools/call" else "params.name"
            return (f"{what} is {self.name_chars:,} characters long; no tool or prompt of this server has a name "
                    f"longer than {longest_name}", "Call tools/list (or prompts/list) for the names this server has.")
        if self.id_chars > MAX_ID_CHARS:
            return (f"the JSON-RPC id is {self.id_chars:,} characters long; this server takes ids of at most "
                    f"{MAX_ID_CHARS}", "Send a number or a short string as the request's id.")
        if self.kind == INTRICATE:
            return (f"the request's JSON takes more than {MAX_STEPS:,} steps to read (members or containers nested "
                    "deeper than a few levels); no MCP client sends such a body",
                    "Send arguments as plain values, lists and objects a few levels deep.")
        return None


def _params(scan: Scan, params: Member) -> tuple[Text | None, dict[str, str]]:
    """`params.name` and the trace context of `params._meta`."""
    name: Text | None = None
    trace: dict[str, str] = {}
    if scan.body[params.start] != ord("{"):
        return name, trace
    for member in scan.members(params.start, PARAMS):
        if member.key == "name":
            name = _kept(scan, member)
        elif scan.body[member.start] == ord("{"):
            trace = {}
            for entry in scan.members(member.start, TRACE):
                value = text(scan.body, entry.start, entry.end)
                if value is not None and len(value) <= MAX_TRACE_CHARS:
                    trace[entry.key] = value
    return name, trace


def _kept(scan: Scan, member: Member) -> Text | None:
    """A string member as kept: cut to KEPT_CHARS, with its whole length."""
    value = text(scan.body, member.start, member.end)
    return Text(value[:KEPT_CHARS], len(value)) if value is not None else None


def read_request(scope: Scope) -> RpcRequest | None:
    """The request the gate read for this scope, or None (not a POST, or refused before its body was read)."""
    found = scope.get("state", {}).get(STATE_KEY)
    return found if isinstance(found, RpcRequest) else None
