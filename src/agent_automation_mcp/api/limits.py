"""The service's rate-limit buckets and the `name=N/Ws,...` spec syntax shared by the sandbox and the pacer."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from ..wording import listed


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most `count` requests in any `window` seconds."""

    count: int
    window: float

    def __post_init__(self) -> None:
        if self.count < 1 or self.window <= 0:
            raise ValueError(f"a rate limit needs count >= 1 and window > 0, got {self.count}/{self.window}s")

    def __str__(self) -> str:
        return f"{self.count}/{self.window:g}s"


STANDARD: Final = "standard"
AGENT_CREATION: Final = "agent_creation"
SETUP_COMMANDS: Final = "setup_commands"
LOG_ANALYSIS: Final = "log_analysis"
LOGS: Final = "logs"
PR_EDIT: Final = "pr_edit"
WEBHOOK_TEST: Final = "webhook_test"
CLI_RULES: Final = "cli_rules"

# The published limits, per API token. The last two are stated only in the OpenAPI descriptions.
DEFAULT_RATE_LIMITS: Final = MappingProxyType(
    {
        STANDARD: RateLimit(60, 30),
        AGENT_CREATION: RateLimit(10, 60),
        SETUP_COMMANDS: RateLimit(5, 60),
        LOG_ANALYSIS: RateLimit(5, 60),
        LOGS: RateLimit(60, 60),
        PR_EDIT: RateLimit(30, 60),
        WEBHOOK_TEST: RateLimit(10, 60),
        CLI_RULES: RateLimit(30, 60),
    }
)

_ITEM = re.compile(r"^\s*([a-z_]+)\s*=\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*$")
_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}


def parse_rate_limits(
    spec: str | None, base: MappingProxyType[str, RateLimit] = DEFAULT_RATE_LIMITS
) -> dict[str, RateLimit]:
    """Apply a partial `standard=60/30s,logs=60/60s` override on top of `base`.

    Unknown bucket names are refused so a typo cannot silently leave a limit at its default.
    """
    limits = dict(base)
    if not spec or not spec.strip():
        return limits
    for item in spec.split(","):
        if not item.strip():
            continue
        match = _ITEM.match(item)
        if match is None:
            raise ValueError(f"bad rate-limit item {item.strip()!r}: expected name=N/Ws, e.g. standard=60/30s")
        name, count, window, unit = match.groups()
        if name not in base:
            raise ValueError(f"unknown rate-limit bucket {name!r}; known: {', '.join(sorted(base))}")
        limits[name] = RateLimit(int(count), float(window) * _UNIT_SECONDS[unit])
    return limits


def named_limits(limits: Mapping[str, RateLimit], names: Iterable[str], joined: str = "and") -> str:
    """`standard (60/30s)`, `agent_creation (10/60s) and standard (60/30s)`: limits as a sentence names them."""
    return listed([f"{name} ({limits[name]})" if name in limits else name for name in names], joined)


def format_rate_limits(limits: dict[str, RateLimit]) -> str:
    return ",".join(f"{name}={limit}" for name, limit in limits.items())
