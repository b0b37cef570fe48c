"""The places this server reaches past the MCP SDK's public API, wrapped once.

`MCPServer` offers no public way to leave unserved methods out, nor to give the `tools/list` and `prompts/list`
handlers the request's context (`list_tools()` and `list_prompts()` take none, and a listing may be narrowed by the
request's headers), nor to write the instructions for the request that asks (the server takes one text when built).
The first two go through the low-level server the SDK keeps in the private `_lowlevel_server`; its
`add_request_handler` is public, its `_request_handlers` is not. `tests/test_sdk_seams.py` fails loudly,
naming the attribute, when an SDK upgrade moves either. The instructions are rewritten in the answer's wire form,
whose shape the same tests pin.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.types import (
    CompleteRequestParams,
    CompleteResult,
    GetPromptRequestParams,
    GetPromptResult,
    InputRequiredResult,
    ListPromptsResult,
    ListToolsResult,
    PaginatedRequestParams,
)

ListToolsHandler = Callable[[ServerRequestContext[Any], PaginatedRequestParams | None], Awaitable[ListToolsResult]]
ListPromptsHandler = Callable[[ServerRequestContext[Any], PaginatedRequestParams | None],
                             Awaitable[ListPromptsResult]]
GetPromptHandler = Callable[[ServerRequestContext[Any], GetPromptRequestParams],
                            Awaitable[GetPromptResult | InputRequiredResult]]
CompletionHandler = Callable[[ServerRequestContext[Any], CompleteRequestParams], Awaitable[CompleteResult]]
InstructionsWriter = Callable[[ServerRequestContext[Any, Any]], Awaitable[str]]
Middleware = Callable[[ServerRequestContext[Any, Any], CallNext], Awaitable[HandlerResult]]
INSTRUCTED: Final = ("initialize", "server/discover")  # the answers that carry instructions: 2025-11-25, 2026-07-28


def lowlevel(server: MCPServer[Any]) -> Server[Any]:
    """The low-level server that holds the request handlers (private in `MCPServer`)."""
    return server._lowlevel_server


def drop_methods(server: MCPServer[Any], *prefixes: str) -> None:
    """Stop answering (and advertising: capabilities follow the handlers) every method under `prefixes`."""
    handlers = lowlevel(server)._request_handlers
    for method in [m for m in handlers if m.startswith(prefixes)]:
        del handlers[method]


def serve_list_tools(server: MCPServer[Any], handler: ListToolsHandler) -> None:
    """Answer `tools/list` with `handler`, which sees the request (`MCPServer.list_tools` does not)."""
    lowlevel(server).add_request_handler("tools/list", PaginatedRequestParams, handler)


def serve_list_prompts(server: MCPServer[Any], handler: ListPromptsHandler) -> None:
    """Answer `prompts/list` with `handler`, which sees the request (`MCPServer.list_prompts` does not): the prompts
    listed follow the tools the request is offered."""
    lowlevel(server).add_request_handler("prompts/list", PaginatedRequestParams, handler)


def serve_get_prompt(server: MCPServer[Any], handler: GetPromptHandler) -> None:
    """Answer `prompts/get` with `handler`: `MCPServer` reports an unknown prompt or a missing argument as an internal
    error, where the protocol asks for invalid params with a message that says which."""
    lowlevel(server).add_request_handler("prompts/get", GetPromptRequestParams, handler)


def serve_completions(server: MCPServer[Any], handler: CompletionHandler) -> None:
    """Answer `completion/complete` with `handler`, which sees the request: `MCPServer.completion()` gives its
    handler none, and completing from the service needs the caller's credentials."""
    lowlevel(server).add_request_handler("completion/complete", CompleteRequestParams, handler)


def instructions_per_request(write: InstructionsWriter) -> Middleware:
    """A middleware giving `initialize` and `server/discover` the instructions `write` makes for the request asking.

    `MCPServer` sends the text it was built with, and its runner answers `initialize` itself, with no handler to
    replace: so the answer is rewritten after the SDK made it, in its wire form (a dict with `instructions` on top).
    """
    async def instructing(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        wire = await call_next(ctx)
        if ctx.method not in INSTRUCTED or not isinstance(wire, dict):
            return wire
        return {**wire, "instructions": await write(ctx)}

    return instructing
