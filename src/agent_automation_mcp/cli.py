"""The command line: `serve` (the default), `sandbox` and `demo`.

stdout belongs to the MCP protocol on stdio, so everything this program says goes to stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections.abc import Sequence
from typing import Final

from . import __version__, logs
from .api.limits import parse_rate_limits
from .api.settings import ApiSettings, is_loopback, parse_org_id
from .config import (
    ADDRESSES_PER_NETWORK,
    AUTH_MODES,
    DEFAULT_TOKEN_CHECKS_PER_ADDRESS,
    DEFAULT_TOKEN_CHECKS_TOTAL,
    LOG_FORMATS,
    LOG_LEVELS,
    LogSettings,
    RemoteSettings,
    ServerSettings,
    parse_auth,
    parse_list,
    parse_org_ids,
    parse_port,
)
from .logs import TenantIds, configure, say, use_tenant_ids
from .tools.registry import OPT_IN_TOOLSETS, TOOLSETS, parse_toolsets, toolsets_help

PROG: Final = "agent-automation-mcp"
COMMANDS: Final = ("serve", "sandbox", "demo")


def _port(value: str) -> int:
    try:
        return parse_port("a port", value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_int(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"a whole number >= 1, got {value!r}")
    return int(value)


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise argparse.ArgumentTypeError(f"a number of seconds >= 0, got {value!r}")
    return seconds


def _add_server_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                        help="stdio (default) or Streamable HTTP at /mcp")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP address to listen on (default 127.0.0.1; "
                                                           "::1 or [::1] for IPv6)")
    parser.add_argument("--port", type=_port, default=8000, help="HTTP port (default 8000)")
    parser.add_argument("--metrics-port", type=_port,
                        help="HTTP: serve /metrics on this port only, not on --port (default: on --port; "
                             "env AGENT_AUTOMATION_METRICS_PORT)")
    parser.add_argument("--auth", choices=AUTH_MODES,
                        help="HTTP: whose token calls use. request: each request's Authorization: Bearer token "
                             "(and X-Organization-Id); env: AGENT_AUTOMATION_API_TOKEN for every caller, loopback "
                             "only; oauth: sign-in with OAuth (clients like Claude and ChatGPT), a Bearer service "
                             "token still accepted, needs --public-url (default: env on a loopback address, "
                             "request on any other; env AGENT_AUTOMATION_AUTH)")
    parser.add_argument("--public-url", metavar="URL",
                        help="HTTP with --auth oauth: the address clients reach this server at, e.g. "
                             "https://mcp.example.com (env AGENT_AUTOMATION_PUBLIC_URL)")
    parser.add_argument("--allowed-host", action="append", default=None, metavar="NAME[:PORT]",
                        help="HTTP: a Host header to accept besides the bind address; repeatable "
                             "(env AGENT_AUTOMATION_ALLOWED_HOSTS, comma-separated)")
    parser.add_argument("--allowed-origin", action="append", default=None, metavar="SCHEME://NAME[:PORT]",
                        help="HTTP: a browser Origin to accept; repeatable (env AGENT_AUTOMATION_ALLOWED_ORIGINS)")
    parser.add_argument("--max-body-bytes", type=_positive_int,
                        help="HTTP: the largest request body (default 1 MiB; env AGENT_AUTOMATION_MAX_BODY_BYTES)")
    parser.add_argument("--max-tenant-calls", type=_positive_int,
                        help="HTTP --auth request: tool calls and task requests (tasks/get, /result, /list, /cancel) "
                             "one token may have in flight on this replica; more wait their turn, first come first "
                             "served, and only a wait past the request's deadline is refused; the configured caller "
                             "(stdio, --auth env) is never capped (default 16; "
                             "env AGENT_AUTOMATION_MAX_TENANT_CALLS)")
    parser.add_argument("--token-checks-per-address", type=_positive_int,
                        help="HTTP --auth request: checks per minute with the service of tokens never accepted "
                             "before, per client address, shared by every replica through Redis; past it 429 "
                             f"(default {DEFAULT_TOKEN_CHECKS_PER_ADDRESS}; env "
                             "AGENT_AUTOMATION_TOKEN_CHECKS_PER_ADDRESS)")
    parser.add_argument("--token-checks-per-network", type=_positive_int,
                        help="HTTP --auth request: the same, per network of client addresses (a /24, or a /64 for "
                             f"IPv6) (default {ADDRESSES_PER_NETWORK} times the per-address budget; env "
                             "AGENT_AUTOMATION_TOKEN_CHECKS_PER_NETWORK)")
    parser.add_argument("--token-checks-total", type=_positive_int,
                        help="HTTP --auth request: the same, for every network together that no accepted token came "
                             f"from in the last week (default {DEFAULT_TOKEN_CHECKS_TOTAL}; "
                             "env AGENT_AUTOMATION_TOKEN_CHECKS_TOTAL)")
    parser.add_argument("--requests-per-token", type=_positive_int,
                        help="HTTP --auth request: task requests (tasks/get, /result, /list, /cancel) and "
                             "completions one token may make a minute, shared by every replica through Redis; past "
                             "it 429 (default 600; env AGENT_AUTOMATION_REQUESTS_PER_TOKEN)")
    parser.add_argument("--trusted-proxy", action="append", default=None, metavar="ADDRESS[/BITS]",
                        help="HTTP: a proxy (address or network) whose X-Forwarded-For names the client, as a "
                             "balancer in front of the replicas; repeatable (default: none, the socket's peer is "
                             "the client; env AGENT_AUTOMATION_TRUSTED_PROXIES, comma-separated)")
    parser.add_argument("--allowed-org", action="append", default=None, metavar="ORG_ID",
                        help="HTTP: serve only tokens of this Codegen organisation (others get 403, and a request "
                             "naming another organisation too); repeatable; * alone: every organisation, on purpose "
                             "(required beyond loopback with per-request tokens: none set refuses to start; env "
                             "AGENT_AUTOMATION_ALLOWED_ORGS, comma-separated)")
    parser.add_argument("--shutdown-grace", type=_seconds,
                        help="HTTP: on SIGTERM, seconds to let calls in flight finish (default 60; "
                             "env AGENT_AUTOMATION_SHUTDOWN_GRACE)")
    parser.add_argument("--sandbox", action="store_true",
                        help="start the local simulator in-process and use it instead of the real service")
    parser.add_argument("--toolsets", help=f"comma-separated, from: {', '.join(TOOLSETS)}, all, default "
                                           f"(default: all but {' and '.join(OPT_IN_TOOLSETS)}; "
                                           "env AGENT_AUTOMATION_TOOLSETS); each is listed below")
    parser.add_argument("--read-only", action="store_true", default=None,
                        help="offer only read-only tools (env AGENT_AUTOMATION_READ_ONLY)")
    parser.add_argument("--max-field-chars", type=int,
                        help="trim trace field values longer than this (env AGENT_AUTOMATION_MAX_FIELD_CHARS)")
    parser.add_argument("--rate-limits", help="override rate limits, e.g. standard=60/30s,logs=60/60s "
                                              "(env AGENT_AUTOMATION_RATE_LIMITS)")
    parser.add_argument("--org-id", help="organisation id (env AGENT_AUTOMATION_ORG_ID)")
    parser.add_argument("--base-url", help="service URL (env AGENT_AUTOMATION_BASE_URL)")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """`command`: the subcommand being run, so the sandbox (slow to import) is loaded only when it is needed."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--log-level", choices=LOG_LEVELS, type=str.upper,
                        help="stderr log level (default INFO serving HTTP, with a line per request; WARNING "
                             "otherwise; env AGENT_AUTOMATION_LOG_LEVEL)")
    common.add_argument("--log-format", choices=LOG_FORMATS, type=str.lower,
                        help="stderr log lines: text (default) or json, one object per line "
                             "(env AGENT_AUTOMATION_LOG_FORMAT)")
    parser = argparse.ArgumentParser(
        prog=PROG, description="MCP server for the Agent Automation Service (Codegen's API).",
        epilog="Without a command, `serve` runs; `serve --help` lists its flags and the toolsets. The API token "
               "comes from AGENT_AUTOMATION_API_TOKEN.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="{serve,sandbox,demo}")
    serve = commands.add_parser("serve", parents=[common], help="run the MCP server (the default)",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=f"toolsets:\n{toolsets_help()}")
    _add_server_arguments(serve)
    sandbox = commands.add_parser("sandbox", parents=[common], help="run the local simulator of the service")
    if command == "sandbox":
        from .sandbox.cli import add_sandbox_arguments

        add_sandbox_arguments(sandbox)
    demo = commands.add_parser("demo", parents=[common],
                               help="walk through a session against the sandbox with a real MCP client")
    demo.add_argument("--run-seconds", type=float, default=4.0, help="how long the demo's agent run takes")
    return parser


def settings_from(args: argparse.Namespace) -> tuple[ApiSettings, ServerSettings, RemoteSettings]:
    """Environment first, flags on top; `ValueError` names what is wrong."""
    api = ApiSettings.from_env()
    if args.base_url:
        api = dataclasses.replace(api, base_url=args.base_url.rstrip("/"))
    if args.org_id:
        api = dataclasses.replace(api, org_id=parse_org_id(args.org_id))
    if args.rate_limits:
        api = dataclasses.replace(api, rate_limits=parse_rate_limits(args.rate_limits))
    server = ServerSettings.from_env()
    if args.toolsets is not None:
        server = dataclasses.replace(server, toolsets=parse_toolsets(args.toolsets))
    if args.read_only:
        server = dataclasses.replace(server, read_only=True)
    if args.max_field_chars is not None:
        server = dataclasses.replace(server, max_field_chars=args.max_field_chars)
    remote = RemoteSettings.from_env()
    flags = {"auth": parse_auth(args.auth), "public_url": args.public_url, "max_body_bytes": args.max_body_bytes,
             "max_tenant_calls": args.max_tenant_calls, "shutdown_grace": args.shutdown_grace,
             "metrics_port": args.metrics_port,
             "allowed_hosts": args.allowed_host and parse_list(",".join(args.allowed_host)),
             "allowed_origins": args.allowed_origin and parse_list(",".join(args.allowed_origin)),
             "token_checks_per_address": args.token_checks_per_address,
             "token_checks_per_network": args.token_checks_per_network,
             "token_checks_total": args.token_checks_total, "requests_per_token": args.requests_per_token,
             "trusted_proxies": args.trusted_proxy and parse_list(",".join(args.trusted_proxy))}
    remote = dataclasses.replace(remote, **{name: value for name, value in flags.items() if value is not None})
    if args.allowed_org:  # apart: `*` parses to None, every organisation
        remote = dataclasses.replace(remote, allowed_orgs=parse_org_ids(",".join(args.allowed_org)))
    return api, server, remote


def auth_mode(transport: str, host: str, chosen: str | None) -> str:
    """`env` on a loopback address (and stdio), `request` on any other; `ValueError` says why a choice is refused."""
    if transport == "stdio":
        if chosen in ("request", "oauth"):
            raise ValueError(f"--auth {chosen} reads each HTTP request's token: it needs --transport http")
        return "env"
    mode = chosen or ("env" if is_loopback(host) else "request")
    if mode == "env" and not is_loopback(host):
        raise ValueError(f"--auth env on {host} would let whoever reaches the port act with this server's API token; "
                         "use --auth request (each caller sends their own token), or listen on 127.0.0.1")
    return mode


def require_allowed_orgs(auth: str, host: str, remote: RemoteSettings) -> None:
    """Beyond loopback, each caller's token is served: which organisations' tokens must be said, or every Codegen user
    whose token reaches the port is a tenant. `*` says every organisation, on purpose."""
    if auth != "env" and remote.allowed_orgs == () and not is_loopback(host):
        raise ValueError(f"AGENT_AUTOMATION_ALLOWED_ORGS (--allowed-org) is not set: on {host}, every Codegen "
                         "user whose token reaches this server would be served. List the company's organisation ids "
                         "(the list_organizations tool shows yours), or set it to * to serve every organisation on "
                         "purpose (docs/remote.md)")


def require_shared_keys(remote: RemoteSettings) -> None:
    """Replicas that share Redis serve one deployment: keys of their own would break it quietly (a confirmation
    answered on another replica fails; one tenant has a name per replica in the logs), so they must be set."""
    missing = [name for name, unset in (("AGENT_AUTOMATION_STATE_KEYS", not remote.state_keys),
                                        ("AGENT_AUTOMATION_LOG_SECRET", not logs.tenant_ids.shared)) if unset]
    if missing:
        raise ValueError(f"{' and '.join(missing)} must be set when replicas share Redis (AGENT_AUTOMATION_REDIS_URL):"
                         " the same value on every replica, e.g. openssl rand -hex 32 (manifests/kubernetes/base: "
                         "keys.env, logs.env)")


def serve(args: argparse.Namespace) -> int:
    from contextlib import ExitStack

    import anyio

    try:
        api, settings, remote = settings_from(args)
        auth = auth_mode(args.transport, args.host, remote.auth)
        if remote.metrics_port == args.port:
            raise ValueError(f"the metrics port must differ from --port ({args.port}): /metrics is served apart")
        policy = None
        if args.transport == "http":
            from .remote.forwarded import parse_proxies
            from .remote.hosts import HostPolicy

            policy = HostPolicy.build(args.host, remote.allowed_hosts, remote.allowed_origins)
            parse_proxies(remote.trusted_proxies)
            require_allowed_orgs(auth, args.host, remote)
        if auth == "oauth":
            from .remote.oauth import SignIn

            SignIn.check(remote)
        if args.transport == "http" and api.redis_url:
            require_shared_keys(remote)
        from . import tracing

        traces = tracing.start()  # the standard OTEL_* variables; off without them
    except ValueError as exc:
        say(f"error: {exc}", logging.ERROR)
        return 2
    if traces is not None:
        say(traces)
    with ExitStack() as stack:
        if args.sandbox:
            from .sandbox import SandboxConfig, SandboxServer

            sandbox = stack.enter_context(SandboxServer(SandboxConfig(rate_limits=api.rate_limits)))
            api = dataclasses.replace(api, base_url=sandbox.url, token=sandbox.token, org_id=sandbox.org_id)
            say(f"--sandbox: using the local simulator at {sandbox.url} (simulated runs, no real service, "
                + (f"clients send Authorization: Bearer {sandbox.token})" if auth != "env" else "no token needed)"))
        elif auth == "env" and not api.token:
            say("no API token: the tools are listed, but every call answers with how to set "
                "AGENT_AUTOMATION_API_TOKEN (or try --sandbox)")
        from .server import build_server
        from .tools.callers import ConfiguredCaller, RequestCaller

        per_request_auth = auth in ("request", "oauth")
        callers = RequestCaller() if per_request_auth else ConfiguredCaller(api.token, api.org_id)
        metrics = None
        if args.transport == "http":
            from .remote.access import AccessMetrics

            metrics = AccessMetrics()
        server = build_server(api, settings, callers=callers, log_level=args.log_level,
                              max_tenant_calls=remote.max_tenant_calls, observer=metrics,
                              state_keys=remote.state_keys)
        tools = ", ".join(spec.name for spec in server.tool_specs)
        logging.getLogger(__name__).info("toolsets %s%s: %s", ",".join(settings.toolsets),
                                         " (read-only)" if settings.read_only else "", tools)
        try:
            if args.transport == "http":
                from .remote.hosts import bracketed, is_wildcard
                from .remote.serve import run_http

                assert policy is not None and metrics is not None
                if is_wildcard(args.host) and not remote.allowed_hosts:
                    say(f"warning: listening on {args.host} with no allowed hosts, so any Host header is accepted "
                        "and DNS rebinding is not prevented; set --allowed-host (AGENT_AUTOMATION_ALLOWED_HOSTS) to "
                        "the names clients use", logging.WARNING)
                if not logs.tenant_ids.shared:
                    say("warning: AGENT_AUTOMATION_LOG_SECRET is not set, so log lines name tenants with a key of "
                        "this process only: the same tenant has another name on each replica and after a restart; "
                        "set it to the same random value (openssl rand -hex 32) on every replica", logging.WARNING)
                if auth != "env" and not remote.state_keys:
                    say("warning: AGENT_AUTOMATION_STATE_KEYS is not set, so a confirmation's continuation, a "
                        "task id" + (" and a sign-in's tokens" if auth == "oauth" else "") + " are sealed with a key "
                        "of this process only: on another replica, or after a restart, they fail; set the same keys "
                        "(openssl rand -hex 32) on every replica", logging.WARNING)
                who = {"request": "each request's own token (Authorization: Bearer)",
                       "oauth": f"each caller's sign-in (OAuth, at {remote.public_url}) or own token",
                       "env": "the token from the environment"}[auth]
                say(f"serving Streamable HTTP at http://{bracketed(args.host)}:{args.port}/mcp, calls made with {who}"
                    + (f"; /metrics at port {remote.metrics_port}" if remote.metrics_port else ""))
                run_http(server, remote, host=args.host, port=args.port, policy=policy,
                         per_request_auth=per_request_auth, metrics=metrics)
            else:
                anyio.run(server.run_stdio_async)
        except KeyboardInterrupt:
            pass
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in (*COMMANDS, "-h", "--help", "--version"):
        argv.insert(0, "serve")  # the default command
    args = build_parser(argv[0]).parse_args(argv)
    try:
        log = LogSettings.from_env()
    except ValueError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    serving_http = args.command == "serve" and args.transport == "http"
    args.log_level = args.log_level or log.level or ("INFO" if serving_http else "WARNING")
    args.log_format = args.log_format or log.format or "text"
    configure(args.log_level, args.log_format)
    use_tenant_ids(TenantIds(log.secret))
    if args.command == "sandbox":
        from .sandbox.cli import run_sandbox

        return run_sandbox(args)
    if args.command == "demo":
        from .demo import run_demo

        return run_demo(args)
    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
