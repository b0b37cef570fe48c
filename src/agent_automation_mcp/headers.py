"""What an HTTP request's headers say about its caller: the bearer token, the organisation, the default repository,
and the names of the headers that narrow what it is offered (read by `tools.registry.narrowed`).

The bearer token, the organisation and the default repository are read once, by the HTTP gate, which answers
400/401 before any tool runs and hands the caller on as a value (`caller.py`): nothing after it reads them again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from .api.settings import parse_id

AUTHORIZATION: Final = "authorization"
ORGANIZATION: Final = "x-organization-id"
REPOSITORY: Final = "x-repo-id"  # as Codegen's own hosted MCP server takes it
TOOLSETS_HEADER: Final = "x-mcp-toolsets"
READONLY_HEADER: Final = "x-mcp-readonly"


def header_dict(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """ASGI's raw headers as a dict, the first of a repeated name winning (as Starlette's `Headers.get`): read
    once per request, then looked up many times, where each `Headers` lookup scans the list."""
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in reversed(list(raw))}


class HeaderError(ValueError):
    """A header that is present but unusable; its message names the header and what to send."""


def bearer_token(headers: Mapping[str, str] | None) -> str | None:
    """The token of `Authorization: Bearer <token>`; None when there is no usable bearer."""
    scheme, _, token = (headers or {}).get(AUTHORIZATION, "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or not token.isascii() or not token.isprintable() or " " in token:
        return None
    return token


def organization_id(headers: Mapping[str, str] | None) -> int | None:
    return _id_in(headers, ORGANIZATION, "an organisation id")


def repository_id(headers: Mapping[str, str] | None) -> int | None:
    """X-Repo-Id: the repository a connection's runs start on when a call names none."""
    return _id_in(headers, REPOSITORY, "a repository id, as list_repositories gives it")


def _id_in(headers: Mapping[str, str] | None, name: str, what: str) -> int | None:
    """The id the header `name` (lower case) holds, None without one; `HeaderError` names the header (`X-Repo-Id`)
    when it holds no id."""
    value = (headers or {}).get(name, "").strip()
    if not value:
        return None
    try:
        return parse_id(value, what)
    except ValueError:
        shown = "-".join(part.capitalize() for part in name.split("-"))
        raise HeaderError(f"{shown} must be a positive integer ({what}), got {value[:40]!r}") from None
