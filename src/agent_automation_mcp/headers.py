"""What an HTTP request's headers say about its caller: the bearer token, the organisation, and narrowing.

Read in two places with the same functions: the HTTP gate (to answer 400/401 before any tool runs) and
the tool call (to act for that caller), so the two can never disagree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from functools import lru_cache
from typing import Final

from .api.settings import parse_org_id
from .config import ServerSettings, parse_bool, parse_toolsets

AUTHORIZATION: Final = "authorization"
ORGANIZATION: Final = "x-organization-id"
TOOLSETS_HEADER: Final = "x-mcp-toolsets"
READONLY_HEADER: Final = "x-mcp-readonly"


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


def narrowed(settings: ServerSettings, headers: Mapping[str, str] | None) -> ServerSettings:
    """The operator's toolsets and read-only ceiling, narrowed (never widened) by `X-MCP-Toolsets` and
    `X-MCP-Readonly`."""
    if not headers:
        return settings
    return _narrowed(settings, headers.get(TOOLSETS_HEADER, "").strip(), headers.get(READONLY_HEADER, "").strip())


@lru_cache(maxsize=256)  # a handful of distinct header values in practice; bounded whatever callers send
def _narrowed(settings: ServerSettings, toolsets: str, read_only: str) -> ServerSettings:
    if toolsets:
        try:
            asked = parse_toolsets(toolsets)
        except ValueError as exc:
            raise HeaderError(f"X-MCP-Toolsets: {exc}") from None
        settings = dataclasses.replace(settings, toolsets=tuple(t for t in settings.toolsets if t in asked))
    if read_only:
        if read_only.lower() not in {"1", "true", "yes", "on", "0", "false", "no", "off"}:
            raise HeaderError(f"X-MCP-Readonly must be true or false, got {read_only[:40]!r}")
        if parse_bool(read_only):
            settings = dataclasses.replace(settings, read_only=True)
    return settings
