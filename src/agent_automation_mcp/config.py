"""Every setting, read from the environment (and overridden by command-line flags) in one place."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from .api.limits import RateLimit, parse_rate_limits

DEFAULT_BASE_URL = "https://api.codegen.com"


def _first(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def parse_bool(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def parse_org_id(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        org_id = int(value)
    except ValueError:
        raise ValueError(f"the organisation id must be a positive integer, got {value!r}") from None
    if org_id < 1:
        raise ValueError(f"the organisation id must be a positive integer, got {value!r}")
    return org_id


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

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ApiSettings:
        """Our names first; the service's own tools' names (`CODEGEN_*`) when ours are unset."""
        env = os.environ if env is None else env
        timeout = _first(env, "AGENT_AUTOMATION_TIMEOUT")
        return cls(
            token=_first(env, "AGENT_AUTOMATION_API_TOKEN", "CODEGEN_API_KEY", "CODEGEN_API_TOKEN"),
            org_id=parse_org_id(_first(env, "AGENT_AUTOMATION_ORG_ID", "CODEGEN_ORG_ID")),
            base_url=(_first(env, "AGENT_AUTOMATION_BASE_URL", "CODEGEN_API_BASE_URL") or DEFAULT_BASE_URL).rstrip("/"),
            timeout=float(timeout) if timeout else 30.0,
            rate_limits=parse_rate_limits(_first(env, "AGENT_AUTOMATION_RATE_LIMITS")),
            redis_url=_first(env, "AGENT_AUTOMATION_REDIS_URL"),
        )
