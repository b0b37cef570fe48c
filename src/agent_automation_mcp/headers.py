"""What an HTTP request's headers say about its caller: the bearer token, the organisation, and the names of
the headers that narrow what it is offered (read by `tools.registry.narrowed`).

The bearer token and the organisation are read once, by the HTTP gate, which answers 400/401 before any tool runs
and hands the caller on as a value (`caller.py`): nothing after it reads them again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from .api.settings import parse_org_id

AUTHORIZATION: Final = "authorization"
ORGANIZATION: Final = "x-organization-id"
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
    value = (headers or {}).get(ORGANIZATION, "").strip()
    if not value:
        return None
    try:
        return parse_org_id(value)
    except ValueError:
        raise HeaderError(f"X-Organization-Id must be a positive integer (an organisation id), got {value[:40]!r}") \
            from None
