"""Every setting, read from the environment (and overridden by command-line flags) in one place."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .api.settings import first_set, number_setting, parse_flag
from .toolsets import DEFAULT_TOOLSETS, parse_toolsets


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = first_set(env, name)
    return default if value is None else parse_flag(name, value)


DEFAULT_MAX_FIELD_CHARS = 1500
MIN_FIELD_CHARS = 100


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """What the MCP server offers: toolsets, the read-only ceiling and how much of a trace field a model sees."""

    toolsets: tuple[str, ...] = DEFAULT_TOOLSETS
    read_only: bool = False
    max_field_chars: int = DEFAULT_MAX_FIELD_CHARS

    def __post_init__(self) -> None:
        if self.max_field_chars < MIN_FIELD_CHARS:
            raise ValueError(f"max_field_chars must be at least {MIN_FIELD_CHARS}, got {self.max_field_chars}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ServerSettings:
        env = os.environ if env is None else env
        return cls(
            toolsets=parse_toolsets(first_set(env, "AGENT_AUTOMATION_TOOLSETS")),
            read_only=_flag(env, "AGENT_AUTOMATION_READ_ONLY", False),
            max_field_chars=number_setting(env, "AGENT_AUTOMATION_MAX_FIELD_CHARS", int, DEFAULT_MAX_FIELD_CHARS,
                                    minimum=MIN_FIELD_CHARS),
        )


AUTH_MODES = ("request", "env")
DEFAULT_TENANT_CALLS = 16  # calls one token may have in flight on one server
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
DEFAULT_SHUTDOWN_GRACE = 25.0


def parse_auth(value: str | None) -> str | None:
    """`request` or `env`; None leaves the choice to the bind address."""
    if value is None or not value.strip():
        return None
    mode = value.strip().lower()
    if mode not in AUTH_MODES:
        raise ValueError(f"the auth mode must be request or env, got {value!r}")
    return mode


def parse_list(value: str | None) -> tuple[str, ...]:
    """A comma-separated list, blanks dropped."""
    return tuple(item.strip() for item in (value or "").split(",") if item.strip())


@dataclass(frozen=True, slots=True)
class RemoteSettings:
    """How the Streamable HTTP transport serves: who the caller is, which Host and Origin headers it accepts,
    its limits and how it shuts down."""

    auth: str | None = None  # request | env | None: env on a loopback address, request on any other
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_tenant_calls: int = DEFAULT_TENANT_CALLS
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RemoteSettings:
        env = os.environ if env is None else env
        return cls(
            auth=parse_auth(first_set(env, "AGENT_AUTOMATION_AUTH")),
            allowed_hosts=parse_list(first_set(env, "AGENT_AUTOMATION_ALLOWED_HOSTS")),
            allowed_origins=parse_list(first_set(env, "AGENT_AUTOMATION_ALLOWED_ORIGINS")),
            max_body_bytes=number_setting(env, "AGENT_AUTOMATION_MAX_BODY_BYTES", int, DEFAULT_MAX_BODY_BYTES,
                                          minimum=1024),
            max_tenant_calls=number_setting(env, "AGENT_AUTOMATION_MAX_TENANT_CALLS", int, DEFAULT_TENANT_CALLS,
                                            minimum=1),
            shutdown_grace=number_setting(env, "AGENT_AUTOMATION_SHUTDOWN_GRACE", float, DEFAULT_SHUTDOWN_GRACE,
                                          minimum=0),
        )
