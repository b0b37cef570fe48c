"""Every setting, read from the environment (and overridden by command-line flags) in one place: each settings
class with its table (`settings_table.Setting` rows), and `SETTINGS`, every table by the class it fills."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from .api.settings import API_SETTINGS, ApiSettings, parse_flag, parse_repo_id
from .settings_table import Choice, Number, Setting, plain, read_env
from .toolsets import DEFAULT_TOOLSETS, KEYWORDS, OPT_IN_TOOLSETS, TOOLSETS, parse_toolsets

DEFAULT_MAX_FIELD_CHARS = 1500
MIN_FIELD_CHARS = 100


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """What the MCP server offers: toolsets, the read-only ceiling and how much of a trace field a model sees."""

    toolsets: tuple[str, ...] = DEFAULT_TOOLSETS
    read_only: bool = False
    max_field_chars: int = DEFAULT_MAX_FIELD_CHARS
    repo_id: int | None = None  # the configured caller's default repository (remote callers send X-Repo-Id)

    def __post_init__(self) -> None:
        if self.max_field_chars < MIN_FIELD_CHARS:
            raise ValueError(f"max_field_chars must be at least {MIN_FIELD_CHARS}, got {self.max_field_chars}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ServerSettings:
        return cls(**read_env(SERVER_SETTINGS, os.environ if env is None else env))


SERVER_SETTINGS: Final = (
    Setting("toolsets", ("AGENT_AUTOMATION_TOOLSETS",), plain(parse_toolsets), flag="--toolsets",
            help=f"comma-separated, from: {', '.join((*TOOLSETS, *KEYWORDS))}; each is listed below",
            note=f"default: all but {' and '.join(OPT_IN_TOOLSETS)}"),
    Setting("read_only", ("AGENT_AUTOMATION_READ_ONLY",), parse_flag, flag="--read-only", switch=True,
            help="offer only read-only tools"),
    Setting("max_field_chars", ("AGENT_AUTOMATION_MAX_FIELD_CHARS",), Number(int, MIN_FIELD_CHARS),
            flag="--max-field-chars", help="trim trace field values longer than this"),
    Setting("repo_id", ("AGENT_AUTOMATION_REPO_ID",), plain(parse_repo_id), flag="--repo-id",
            help="the repository create_agent_run and generate_setup_commands use when a call names none (stdio "
                 "and --auth env; a remote caller sends X-Repo-Id instead); a call's own repo_id wins",
            note="default: none, the service's choice"),
)


AUTH_MODES = ("request", "env", "oauth")
DEFAULT_TENANT_CALLS = 16  # calls one token may have in flight on one server
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
# Body bytes one replica holds at once for requests whose caller is known (remote/bodies.py): sixteen bodies of the
# largest size; with what the SDK makes of them, well within a 512 MiB replica.
DEFAULT_BODY_BYTES_HELD = 16 * DEFAULT_MAX_BODY_BYTES
# Covers the longest call a tool may make (get_agent_run waiting 50 s, then its last poll: 54 s, tools/runs.py) and
# its answer; tests/remote/test_drain.py holds this, the Deployment's grace and the call budgets together.
DEFAULT_SHUTDOWN_GRACE = 60.0
MIN_STATE_KEY_CHARS = 32
# Per minute: checks of tokens never accepted before (remote/budgets.py). An office of 100 developers whose tokens
# all come new from one address in the same minute (a first rollout behind a proxy) still fits; a network, twice
# that (unless set); the total, over networks no accepted token came from, takes ten networks at their bound.
DEFAULT_TOKEN_CHECKS_PER_ADDRESS = 100
ADDRESSES_PER_NETWORK = 2  # a network's budget is this many addresses' (remote/budgets.py), unless set
DEFAULT_TOKEN_CHECKS_TOTAL = 2000
DEFAULT_REQUESTS_PER_TOKEN = 600  # task and completion requests a minute: e.g. 50 tasks polled every 5 s
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


def parse_instant(value: str) -> float:
    """A moment, as ISO 8601 with its zone (`2026-03-01T09:30:00Z`) or Unix seconds; `ValueError` says the form."""
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise ValueError(f"a time is ISO 8601 with its zone, like 2026-03-01T09:30:00Z (date -u +%FT%TZ prints now), "
                         f"or Unix seconds; got {value!r}")
    return moment.timestamp()


def parse_ended_users(value: str | None) -> tuple[tuple[int, float], ...]:
    """`USER_ID@TIME` entries, comma-separated: the sign-ins each Codegen user made before that time have ended."""
    ended = []
    for entry in parse_list(value):
        user, at, moment = entry.partition("@")
        if not at or not user.strip().isdigit():
            raise ValueError(f"AGENT_AUTOMATION_OAUTH_ENDED_USERS (--oauth-end-user) lists USER_ID@TIME entries, a "
                             f"Codegen user id and a time, like 123@2026-03-01T09:30:00Z; got {entry!r}")
        ended.append((int(user), parse_instant(moment)))
    return tuple(ended)


def parse_networks(value: str | None) -> tuple[str, ...]:
    """Networks (`198.51.100.0/24`, `2001:db8::/48`) or single addresses, as their canonical text."""
    networks = []
    for entry in parse_list(value):
        try:
            networks.append(str(ipaddress.ip_network(entry, strict=False)))
        except ValueError:
            raise ValueError(f"AGENT_AUTOMATION_VOUCHED_NETWORKS (--vouched-network) lists networks like "
                             f"198.51.100.0/24 or addresses; got {entry!r}") from None
    return tuple(networks)


ANY_REDIRECT_HOST: Final = "*"  # AGENT_AUTOMATION_OAUTH_REDIRECT_HOSTS: any host, each one warned about
# Where the chat apps send a person back after signing in (their redirect URIs' hosts), and this machine: what a
# company deployment accepts unless its operator says otherwise.
CHAT_APP_REDIRECT_HOSTS: Final = ("claude.ai", "claude.com", "chatgpt.com", "chat.openai.com", "vscode.dev",
                                  "insiders.vscode.dev", "127.0.0.1", "::1", "localhost")


def parse_redirect_hosts(value: str | None) -> tuple[str, ...]:
    """Host names (no scheme, port or path), lower case, or `*` among them for any other host too."""
    hosts = tuple(host.lower().strip("[]") for host in parse_list(value))
    for host in hosts:
        if host != ANY_REDIRECT_HOST and (any(c in host for c in "/@ ") or (":" in host and not _is_address(host))):
            raise ValueError(f"AGENT_AUTOMATION_OAUTH_REDIRECT_HOSTS (--oauth-redirect-host) lists host names, like "
                             f"claude.ai, or * for any; got {host!r}")
    return hosts


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


EVERY_ORGANIZATION: Final = "*"  # AGENT_AUTOMATION_ALLOWED_ORGS: every organisation, on purpose


def parse_org_ids(value: str | None) -> tuple[int, ...] | None:
    """Comma-separated organisation ids, or `*` (None: every organisation, as the operator says); `ValueError` names
    the entry that is not one."""
    if value is not None and value.strip() == EVERY_ORGANIZATION:
        return None
    ids = []
    for entry in (value or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        if not entry.isdigit() or len(entry) > 18:
            raise ValueError(f"AGENT_AUTOMATION_ALLOWED_ORGS (--allowed-org) lists organisation ids (numbers), or is "
                             f"{EVERY_ORGANIZATION} alone for every organisation; got {entry!r}")
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
    body_bytes_held: int = DEFAULT_BODY_BYTES_HELD
    max_tenant_calls: int = DEFAULT_TENANT_CALLS
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE
    # Every replica behind one balancer needs the same keys (a Secret): the first seals, every one opens.
    state_keys: tuple[str, ...] = field(default=(), repr=False)
    metrics_port: int | None = None  # None: /metrics on the public port; a port: there only
    token_checks_per_address: int = DEFAULT_TOKEN_CHECKS_PER_ADDRESS
    token_checks_per_network: int | None = None  # None: ADDRESSES_PER_NETWORK times the per-address budget
    token_checks_total: int = DEFAULT_TOKEN_CHECKS_TOTAL
    requests_per_token: int = DEFAULT_REQUESTS_PER_TOKEN  # task and completion requests a minute (remote/gate.py)
    trusted_proxies: tuple[str, ...] = ()  # peers whose X-Forwarded-For names the client
    vouched_networks: tuple[str, ...] = ()  # the company's egress networks: they spend no budget's total
    # The organisations served (remote/organizations.py); None: every one, as `*` says; empty: not said, which only
    # loopback accepts (cli.require_allowed_orgs)
    allowed_orgs: tuple[int, ...] | None = ()
    # --auth oauth: the external base URL (issuer; the resource is <public_url>/mcp), the Fernet keys that encrypt
    # the service tokens of sign-ins inside their sealed tokens (first encrypts, all decrypt), and sign-ins per
    # client address per minute
    public_url: str | None = None
    oauth_keys: tuple[str, ...] = field(default=(), repr=False)
    oauth_signins: int = DEFAULT_OAUTH_SIGNINS
    oauth_trusted_client_hosts: tuple[str, ...] = ()  # host:port whose client_id URLs may be private (tests)
    oauth_redirect_hosts: tuple[str, ...] = CHAT_APP_REDIRECT_HOSTS  # where apps may send a person back; * any
    # The operator's ends of sign-ins (remote/oauth/cutoffs.py): every one made before a time, and per person
    oauth_ended_before: float | None = None
    oauth_ended_users: tuple[tuple[int, float], ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RemoteSettings:
        return cls(**read_env(REMOTE_SETTINGS, os.environ if env is None else env))


def parse_port(name: str, value: str) -> int:
    """A TCP port; `ValueError` names `name` (a variable, or what a flag is)."""
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise ValueError(f"{name} must be a number from 1 to 65535, got {value!r}")
    return int(value)


def port(name: str | None, value: str) -> int:
    return parse_port(name or "a port", value)


def _request(what: str) -> str:
    """The start of the help of a setting that bounds callers sending their own tokens."""
    return f"HTTP --auth request: {what}"


REMOTE_SETTINGS: Final = (
    Setting("metrics_port", ("AGENT_AUTOMATION_METRICS_PORT",), port, flag="--metrics-port",
            help="HTTP: serve /metrics on this port only, not on --port", note="default: on --port"),
    Setting("auth", ("AGENT_AUTOMATION_AUTH",), plain(parse_auth), flag="--auth", choices=AUTH_MODES,
            help="HTTP: whose token calls use. request: each request's Authorization: Bearer token (and "
                 "X-Organization-Id); env: AGENT_AUTOMATION_API_TOKEN for every caller, loopback only; oauth: sign-in "
                 "with OAuth (clients like Claude and ChatGPT), a Bearer service token still accepted, needs "
                 "--public-url", note="default: env on a loopback address, request on any other"),
    Setting("public_url", ("AGENT_AUTOMATION_PUBLIC_URL",), flag="--public-url", metavar="URL",
            help="HTTP with --auth oauth: the address clients reach this server at, e.g. https://mcp.example.com"),
    Setting("allowed_hosts", ("AGENT_AUTOMATION_ALLOWED_HOSTS",), plain(parse_list), flag="--allowed-host",
            repeatable=True, metavar="NAME[:PORT]",
            help="HTTP: a Host header to accept besides the bind address; repeatable"),
    Setting("allowed_origins", ("AGENT_AUTOMATION_ALLOWED_ORIGINS",), plain(parse_list), flag="--allowed-origin",
            repeatable=True, metavar="SCHEME://NAME[:PORT]", help="HTTP: a browser Origin to accept; repeatable"),
    Setting("max_body_bytes", ("AGENT_AUTOMATION_MAX_BODY_BYTES",), Number(int, 1024), flag="--max-body-bytes",
            help="HTTP: the largest request body", note="default 1 MiB"),
    Setting("body_bytes_held", ("AGENT_AUTOMATION_BODY_BYTES_HELD",), Number(int, 1024), flag="--body-bytes-held",
            help="HTTP: the most request-body bytes one replica holds at once (a body is read only once its caller "
                 "is known); a body past it gets 503, nothing done; at least --max-body-bytes",
            note="default 16 MiB"),
    Setting("max_tenant_calls", ("AGENT_AUTOMATION_MAX_TENANT_CALLS",), Number(int, 1), flag="--max-tenant-calls",
            help=_request("tool calls and task requests (tasks/get, /result, /list, /cancel) one token may have in "
                          "flight on this replica; more wait their turn, first come first served, and only a wait "
                          "past the request's deadline is refused; the configured caller (stdio, --auth env) is "
                          "never capped")),
    Setting("token_checks_per_address", ("AGENT_AUTOMATION_TOKEN_CHECKS_PER_ADDRESS",), Number(int, 1),
            flag="--token-checks-per-address",
            help=_request("checks per minute with the service of tokens never accepted before, per client address, "
                          "shared by every replica through Redis; past it 429")),
    Setting("token_checks_per_network", ("AGENT_AUTOMATION_TOKEN_CHECKS_PER_NETWORK",), Number(int, 1),
            flag="--token-checks-per-network",
            help=_request("the same, per network of client addresses (a /24, or a /64 for IPv6)"),
            note=f"default {ADDRESSES_PER_NETWORK} times the per-address budget"),
    Setting("token_checks_total", ("AGENT_AUTOMATION_TOKEN_CHECKS_TOTAL",), Number(int, 1),
            flag="--token-checks-total",
            help=_request("the same, for every network together that no accepted token came from in the last week")),
    Setting("requests_per_token", ("AGENT_AUTOMATION_REQUESTS_PER_TOKEN",), Number(int, 1),
            flag="--requests-per-token",
            help=_request("task requests (tasks/get, /result, /list, /cancel) and completions one token may make a "
                          "minute, shared by every replica through Redis; past it 429")),
    Setting("trusted_proxies", ("AGENT_AUTOMATION_TRUSTED_PROXIES",), plain(parse_list), flag="--trusted-proxy",
            repeatable=True, metavar="ADDRESS[/BITS]",
            help="HTTP: a proxy (address or network) whose X-Forwarded-For names the client, as a balancer in front "
                 "of the replicas; repeatable", note="default: none, the socket's peer is the client"),
    Setting("vouched_networks", ("AGENT_AUTOMATION_VOUCHED_NETWORKS",), plain(parse_networks),
            flag="--vouched-network", repeatable=True, metavar="NETWORK",
            help="HTTP: a network the company's people come from (its egress, e.g. 198.51.100.0/24): it never spends "
                 "the strangers' totals of token checks, so no flood from elsewhere refuses a colleague there; "
                 "repeatable", note="default: none; networks an accepted token came from this week are vouched too"),
    Setting("allowed_orgs", ("AGENT_AUTOMATION_ALLOWED_ORGS",), plain(parse_org_ids), flag="--allowed-org",
            repeatable=True, metavar="ORG_ID",
            help="HTTP: serve only tokens of this Codegen organisation (others get 403, and a request naming another "
                 "organisation too); repeatable; * alone: every organisation, on purpose",
            note="required beyond loopback with per-request tokens: none set refuses to start"),
    Setting("shutdown_grace", ("AGENT_AUTOMATION_SHUTDOWN_GRACE",), Number(float, 0), flag="--shutdown-grace",
            help="HTTP: on SIGTERM, seconds to let calls in flight finish"),
    Setting("state_keys", ("AGENT_AUTOMATION_STATE_KEYS",), plain(parse_state_keys)),
    Setting("oauth_keys", ("AGENT_AUTOMATION_OAUTH_KEYS",), plain(parse_list)),
    Setting("oauth_signins", ("AGENT_AUTOMATION_OAUTH_SIGNINS_PER_MINUTE",), Number(int, 1)),
    Setting("oauth_trusted_client_hosts", ("AGENT_AUTOMATION_OAUTH_TRUSTED_CLIENT_HOSTS",), plain(parse_list)),
    Setting("oauth_redirect_hosts", ("AGENT_AUTOMATION_OAUTH_REDIRECT_HOSTS",), plain(parse_redirect_hosts),
            flag="--oauth-redirect-host", repeatable=True, metavar="HOST",
            help="HTTP with --auth oauth: a host apps may send a person back to after signing in (their redirect "
                 "URIs'); an app registering another is refused; * for any host, with a warning at start and on the "
                 "consent page; repeatable",
            note=f"default: the chat apps' and this machine's ({', '.join(CHAT_APP_REDIRECT_HOSTS)})"),
    Setting("oauth_ended_before", ("AGENT_AUTOMATION_OAUTH_ENDED_BEFORE",), plain(parse_instant),
            flag="--oauth-ended-before", metavar="TIME",
            help="HTTP with --auth oauth: every sign-in made before this time has ended (ISO 8601 with its zone, "
                 "or Unix seconds), whatever Redis holds; its people sign in again", note="default: none"),
    Setting("oauth_ended_users", ("AGENT_AUTOMATION_OAUTH_ENDED_USERS",), plain(parse_ended_users),
            flag="--oauth-end-user", repeatable=True, metavar="USER_ID@TIME",
            help="HTTP with --auth oauth: every sign-in this Codegen user made before this time has ended, whatever "
                 "Redis holds; repeatable", note="default: none"),
)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")
MIN_LOG_SECRET_CHARS = 16


def _log_secret(name: str | None, value: str) -> str:
    if len(value) < MIN_LOG_SECRET_CHARS:
        raise ValueError(f"{name} must be at least {MIN_LOG_SECRET_CHARS} characters (e.g. openssl rand -hex 32)")
    return value


@dataclass(frozen=True, slots=True)
class LogSettings:
    """What goes to stderr and how tenants are named there; flags (`--log-level`, `--log-format`) win."""

    level: str | None = None  # None: INFO when serving HTTP (an access line per request), WARNING otherwise
    format: str | None = None  # None: text
    secret: str | None = field(default=None, repr=False)  # the HMAC key naming tenants alike on every replica

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LogSettings:
        return cls(**read_env(LOG_SETTINGS, os.environ if env is None else env))


LOG_SETTINGS: Final = (
    Setting("level", ("AGENT_AUTOMATION_LOG_LEVEL",), Choice(LOG_LEVELS), flag="--log-level", choices=LOG_LEVELS,
            help="stderr log level", note="default INFO serving HTTP, with a line per request; WARNING otherwise"),
    Setting("format", ("AGENT_AUTOMATION_LOG_FORMAT",), Choice(LOG_FORMATS), flag="--log-format",
            choices=LOG_FORMATS, help="stderr log lines: text (default) or json, one object per line"),
    Setting("secret", ("AGENT_AUTOMATION_LOG_SECRET",), _log_secret),
)

# Every setting, by the settings class it fills, in the order `--help` lists their flags.
SETTINGS: Final[Mapping[type[Any], tuple[Setting, ...]]] = {
    ApiSettings: API_SETTINGS, ServerSettings: SERVER_SETTINGS, RemoteSettings: REMOTE_SETTINGS,
    LogSettings: LOG_SETTINGS}
