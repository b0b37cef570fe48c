"""Every setting, read from the environment (and overridden by command-line flags) in one place."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

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


AUTH_MODES = ("request", "env", "oauth")
DEFAULT_TENANT_CALLS = 16  # calls one token may have in flight on one server
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
# Covers the longest call a tool may make (get_agent_run waiting 50 s, then its last poll: 54 s, tools/runs.py) and
# its answer; tests/remote/test_drain.py holds this, the Deployment's grace and the call budgets together.
DEFAULT_SHUTDOWN_GRACE = 60.0
MIN_STATE_KEY_CHARS = 32
# Per minute: checks of tokens never accepted before (remote/budgets.py). A company of 200 developers whose
# tokens all come new from one address in the same minute (a first rollout behind a proxy) still fits.
DEFAULT_TOKEN_CHECKS_PER_ADDRESS = 200
DEFAULT_TOKEN_CHECKS_TOTAL = 600
DEFAULT_OAUTH_SIGNINS = 10  # sign-ins one client address may complete per minute (remote/oauth/signin.py)


def parse_auth(value: str | None) -> str | None:
    """`request`, `env` or `oauth`; None leaves the choice to the bind address."""
    if value is None or not value.strip():
        return None
    mode = value.strip().lower()
    if mode not in AUTH_MODES:
        raise ValueError(f"the auth mode must be request, env or oauth, got {value!r}")
    return mode


def parse_list(value: str | None) -> tuple[str, ...]:
    """A comma-separated list, blanks dropped."""
    return tuple(item.strip() for item in (value or "").split(",") if item.strip())


def parse_state_keys(value: str | None) -> tuple[str, ...]:
    """The keys that seal what any replica must open (confirmations, task ids, sign-ins), newest first; the message
    never quotes a key."""
    keys = parse_list(value)
    for number, key in enumerate(keys, 1):
        if len(key) < MIN_STATE_KEY_CHARS:
            raise ValueError(f"AGENT_AUTOMATION_STATE_KEYS: key {number} has {len(key)} characters, it needs at least "
                             f"{MIN_STATE_KEY_CHARS} of random text (python3 -c 'import secrets; "
                             "print(secrets.token_hex(32))')")
    if len(set(keys)) != len(keys):
        raise ValueError("AGENT_AUTOMATION_STATE_KEYS: a key is listed twice")
    return keys


def parse_org_ids(value: str | None) -> tuple[int, ...]:
    """Comma-separated organisation ids; `ValueError` names the entry that is not one."""
    ids = []
    for entry in (value or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        if not entry.isdigit() or len(entry) > 18:
            raise ValueError(f"AGENT_AUTOMATION_ALLOWED_ORGS (--allowed-org) lists organisation ids (numbers), "
                             f"got {entry!r}")
        ids.append(int(entry))
    return tuple(ids)


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
    # Every replica behind one balancer needs the same keys (a Secret): the first seals, every one opens.
    state_keys: tuple[str, ...] = field(default=(), repr=False)
    metrics_port: int | None = None  # None: /metrics on the public port; a port: there only
    token_checks_per_address: int = DEFAULT_TOKEN_CHECKS_PER_ADDRESS
    token_checks_total: int = DEFAULT_TOKEN_CHECKS_TOTAL
    trusted_proxies: tuple[str, ...] = ()  # peers whose X-Forwarded-For names the client
    allowed_orgs: tuple[int, ...] = ()  # the organisations served (remote/organizations.py); empty: every one
    # --auth oauth: the external base URL (issuer; the resource is <public_url>/mcp), the Fernet keys that encrypt
    # the service tokens of sign-ins inside their sealed tokens (first encrypts, all decrypt), and sign-ins per
    # client address per minute
    public_url: str | None = None
    oauth_keys: tuple[str, ...] = field(default=(), repr=False)
    oauth_signins: int = DEFAULT_OAUTH_SIGNINS
    oauth_trusted_client_hosts: tuple[str, ...] = ()  # host:port whose client_id URLs may be private (tests)

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
            state_keys=parse_state_keys(first_set(env, "AGENT_AUTOMATION_STATE_KEYS")),
            metrics_port=_port_setting(env, "AGENT_AUTOMATION_METRICS_PORT"),
            token_checks_per_address=number_setting(env, "AGENT_AUTOMATION_TOKEN_CHECKS_PER_ADDRESS", int,
                                                    DEFAULT_TOKEN_CHECKS_PER_ADDRESS, minimum=1),
            token_checks_total=number_setting(env, "AGENT_AUTOMATION_TOKEN_CHECKS_TOTAL", int,
                                              DEFAULT_TOKEN_CHECKS_TOTAL, minimum=1),
            trusted_proxies=parse_list(first_set(env, "AGENT_AUTOMATION_TRUSTED_PROXIES")),
            allowed_orgs=parse_org_ids(first_set(env, "AGENT_AUTOMATION_ALLOWED_ORGS")),
            public_url=first_set(env, "AGENT_AUTOMATION_PUBLIC_URL"),
            oauth_keys=parse_list(first_set(env, "AGENT_AUTOMATION_OAUTH_KEYS")),
            oauth_signins=number_setting(env, "AGENT_AUTOMATION_OAUTH_SIGNINS_PER_MINUTE", int, DEFAULT_OAUTH_SIGNINS,
                                         minimum=1),
            oauth_trusted_client_hosts=parse_list(first_set(env, "AGENT_AUTOMATION_OAUTH_TRUSTED_CLIENT_HOSTS")),
        )


def parse_port(name: str, value: str) -> int:
    """A TCP port; `ValueError` names `name` (a variable, or what a flag is)."""
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise ValueError(f"{name} must be a number from 1 to 65535, got {value!r}")
    return int(value)


def _port_setting(env: Mapping[str, str], name: str) -> int | None:
    value = first_set(env, name)
    return None if value is None else parse_port(name, value)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")
MIN_LOG_SECRET_CHARS = 16


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str | None:
    value = first_set(env, name)
    if value is None:
        return None
    for choice in choices:
        if value.lower() == choice.lower():
            return choice
    raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")


@dataclass(frozen=True, slots=True)
class LogSettings:
    """What goes to stderr and how tenants are named there; flags (`--log-level`, `--log-format`) win."""

    level: str | None = None  # None: INFO when serving HTTP (an access line per request), WARNING otherwise
    format: str | None = None  # None: text
    secret: str | None = field(default=None, repr=False)  # the HMAC key naming tenants alike on every replica

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LogSettings:
        env = os.environ if env is None else env
        secret = first_set(env, "AGENT_AUTOMATION_LOG_SECRET")
        if secret is not None and len(secret) < MIN_LOG_SECRET_CHARS:
            raise ValueError(f"AGENT_AUTOMATION_LOG_SECRET must be at least {MIN_LOG_SECRET_CHARS} characters "
                             "(e.g. openssl rand -hex 32)")
        return cls(level=_choice(env, "AGENT_AUTOMATION_LOG_LEVEL", LOG_LEVELS),
                   format=_choice(env, "AGENT_AUTOMATION_LOG_FORMAT", LOG_FORMATS), secret=secret)
