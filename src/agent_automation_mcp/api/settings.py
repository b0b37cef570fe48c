"""How to reach the service and pace calls to it, read from the environment.

The API layer's own settings: `api/` reads nothing from the MCP server's configuration.
"""

from __future__ import annotations

import ipaddress
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from ..settings_table import Number, Setting, plain, read_env
from .limits import RateLimit, parse_rate_limits
from .operations import parse_bucket_map

DEFAULT_BASE_URL = "https://api.codegen.com"


TRUE_WORDS: Final = ("1", "true", "yes", "on")
FALSE_WORDS: Final = ("0", "false", "no", "off")


def parse_flag(name: str | None, value: str) -> bool:
    """A boolean that fails closed: a value that is not clearly true or false is refused, so a typo in a safety
    switch (`AGENT_AUTOMATION_READ_ONLY=y`) cannot silently leave it off. A `Parse`: `name` is None for a flag."""
    if value.lower() in TRUE_WORDS:
        return True
    if value.lower() in FALSE_WORDS:
        return False
    raise ValueError(f"{f'{name} must be ' if name else ''}one of {', '.join(TRUE_WORDS)} (on) or "
                     f"{', '.join(FALSE_WORDS)} (off), got {value[:40]!r}")


def parse_org_id(value: str | None) -> int | None:
    return parse_id(value, "organisation")


def parse_repo_id(value: str | None) -> int | None:
    return parse_id(value, "repository")


def parse_id(value: str | None, what: str) -> int | None:
    """An id the service gave a `what` (an organisation, a repository): a positive integer."""
    if value is None:
        return None
    try:
        found = int(value)
    except ValueError:
        raise ValueError(f"the {what} id must be a positive integer, got {value!r}") from None
    if found < 1:
        raise ValueError(f"the {what} id must be a positive integer, got {value!r}")
    return found


def check_base_url(url: str) -> None:
    """Refuse a base URL that would send the token in clear text or put a password in logs (never echoing it)."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        raise ValueError("the base URL (AGENT_AUTOMATION_BASE_URL or --base-url) is not a valid URL") from None
    if parts.username is not None or parts.password is not None:
        shown = urllib.parse.urlunsplit(parts._replace(netloc=f"…@{parts.netloc.rpartition('@')[2]}"))
        raise ValueError(f"the base URL {shown} carries a user name or password; remove them (the API token in "
                         "AGENT_AUTOMATION_API_TOKEN is the only credential, and a URL ends up in logs)")
    if parts.scheme not in ("https", "http") or not host:
        raise ValueError(f"the base URL {url!r} must be an https:// URL with a host")
    if parts.scheme == "http" and not is_loopback(host):
        raise ValueError(f"the base URL {url} is plain http:// to another machine, so the API token would travel "
                         "in clear text; use https:// (http:// is only for loopback: 127.0.0.1, ::1, localhost)")


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address (an IPv6 one with or without brackets)."""
    name = host.strip().lower().rstrip(".").strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """How to reach the service and pace calls to it."""

    token: str | None = field(default=None, repr=False)
    org_id: int | None = None
    base_url: str = DEFAULT_BASE_URL
    timeout: float = 30.0
    connect_timeout: float = 5.0
    rate_limits: dict[str, RateLimit] = field(default_factory=lambda: parse_rate_limits(None))
    redis_url: str | None = field(default=None, repr=False)
    rate_margin: float = 0.25  # seconds kept free beyond each window, for network jitter
    max_replicas: int = 4  # bounds the replica count; cut off from Redis, each paces at 1/max_replicas after a window
    bucket_map: dict[str, tuple[str, ...]] = field(default_factory=dict)  # operation -> buckets, over the table's

    def __post_init__(self) -> None:
        check_base_url(self.base_url)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ApiSettings:
        """Our names first; the service's own tools' names (`CODEGEN_*`) when ours are unset."""
        return cls(**read_env(API_SETTINGS, os.environ if env is None else env))


API_SETTINGS: Final = (
    Setting("token", ("AGENT_AUTOMATION_API_TOKEN", "CODEGEN_API_KEY", "CODEGEN_API_TOKEN")),
    Setting("org_id", ("AGENT_AUTOMATION_ORG_ID", "CODEGEN_ORG_ID"), plain(parse_org_id), flag="--org-id",
            help="organisation id"),
    Setting("base_url", ("AGENT_AUTOMATION_BASE_URL", "CODEGEN_API_BASE_URL"), lambda name, url: url.rstrip("/"),
            flag="--base-url", help="service URL"),
    Setting("timeout", ("AGENT_AUTOMATION_TIMEOUT",), Number(float, 0.1)),
    Setting("rate_limits", ("AGENT_AUTOMATION_RATE_LIMITS",), plain(parse_rate_limits), flag="--rate-limits",
            help="override rate limits, e.g. standard=60/30s,logs=60/60s"),
    Setting("redis_url", ("AGENT_AUTOMATION_REDIS_URL",)),
    Setting("rate_margin", ("AGENT_AUTOMATION_RATE_MARGIN",), Number(float, 0)),
    Setting("max_replicas", ("AGENT_AUTOMATION_MAX_REPLICAS",), Number(int, 1)),
    Setting("bucket_map", ("AGENT_AUTOMATION_BUCKET_MAP",), plain(parse_bucket_map)),
)
