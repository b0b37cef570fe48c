"""The command line: `serve` (the default), `sandbox` and `demo`.

stdout belongs to the MCP protocol on stdio, so everything this program says goes to stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, Final, TypeVar

from . import __version__, logs
from .api.settings import ApiSettings, is_loopback
from .config import SETTINGS, LogSettings, RemoteSettings, ServerSettings, port
from .logs import TenantIds, configure, say, use_tenant_ids
from .settings_table import Parse, Setting

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from .remote.access import AccessMetrics
    from .remote.hosts import HostPolicy
    from .server import AgentAutomationServer

PROG: Final = "agent-automation-mcp"
COMMANDS: Final = ("serve", "sandbox", "demo")
PER_REQUEST: Final = ("request", "oauth")  # the auth modes in which each caller brings their own token


def _flag_type(parse: Parse) -> Callable[[str], Any]:
    """A setting's parser as argparse's `type`: a bad value is a usage error that says what is wrong."""
    def flag_value(value: str) -> Any:
        try:
            return parse(None, value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return flag_value


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def _help(setting: Setting, default: Any) -> str:
    """The flag's help, then its default and its variable, as the table and the settings class say them."""
    if setting.note is None and isinstance(default, int | float | str) and not isinstance(default, bool):
        said = [f"default {default:g}" if isinstance(default, float) else f"default {default}"]
    else:
        said = [setting.note] if setting.note else []
    if setting.env:
        said.append(f"env {setting.env[0]}{', comma-separated' if setting.repeatable else ''}")
    return f"{setting.help} ({'; '.join(said)})" if said else setting.help


def _add_settings(parser: argparse.ArgumentParser, settings: type[Any]) -> None:
    """A flag for each row of `settings`' table that has one."""
    defaults = {field.name: field.default for field in dataclasses.fields(settings)}
    for setting in SETTINGS[settings]:
        if setting.flag is None:
            continue
        help = _help(setting, defaults[setting.field])
        if setting.switch:
            parser.add_argument(setting.flag, action="store_true", default=None, help=help)
        elif setting.repeatable:
            parser.add_argument(setting.flag, action="append", metavar=setting.metavar, help=help)
        else:
            parser.add_argument(setting.flag, type=_flag_type(setting.parse), choices=setting.choices,
                                metavar=setting.metavar, help=help)


Settings = TypeVar("Settings", bound="DataclassInstance")


def with_flags(settings: Settings, args: argparse.Namespace) -> Settings:
    """`settings` (from the environment) with the flags given on top; `ValueError` names what is wrong."""
    given = {}
    for setting in SETTINGS[type(settings)]:
        value = getattr(args, _dest(setting.flag), None) if setting.flag else None
        if value is not None:
            given[setting.field] = setting.parse(None, ",".join(value)) if setting.repeatable else value
    return dataclasses.replace(settings, **given)


class _Parser(argparse.ArgumentParser):
    """`epilog_from` writes the epilog when it is read (for help): the toolsets' lines need every tool imported (a
    second of start-up), which a mistyped flag should not wait for."""

    def __init__(self, *args: Any, epilog_from: Callable[[], str] | None = None, **kwargs: Any) -> None:
        self.epilog_from = epilog_from
        super().__init__(*args, **kwargs)

    @property
    def epilog(self) -> str | None:
        return self.epilog_from() if self.epilog_from is not None else self._epilog

    @epilog.setter
    def epilog(self, value: str | None) -> None:
        self._epilog = value


def _toolsets_epilog() -> str:
    from .tools.registry import toolsets_help

    return f"toolsets:\n{toolsets_help()}"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """`command`: the subcommand being run, so the sandbox (slow to import) is loaded only when it is needed."""
    common = _Parser(add_help=False)  # the subcommands' parent, of their class (as typeshed's add_parser asks)
    _add_settings(common, LogSettings)
    parser = argparse.ArgumentParser(
        prog=PROG, description="MCP server for the Agent Automation Service (Codegen's API).",
        epilog="Without a command, `serve` runs; `serve --help` lists its flags and the toolsets. The API token "
               "comes from AGENT_AUTOMATION_API_TOKEN.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="{serve,sandbox,demo}", parser_class=_Parser)
    serve = commands.add_parser("serve", parents=[common], help="run the MCP server (the default)",
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog_from=_toolsets_epilog)
    serve.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                       help="stdio (default) or Streamable HTTP at /mcp")
    serve.add_argument("--host", default="127.0.0.1",
                       help="HTTP address to listen on (default 127.0.0.1; ::1 or [::1] for IPv6)")
    serve.add_argument("--port", type=_flag_type(port), default=8000, help="HTTP port (default 8000)")
    serve.add_argument("--sandbox", action="store_true",
                       help="start the local simulator in-process and use it instead of the real service")
    for settings in (ApiSettings, ServerSettings, RemoteSettings):
        _add_settings(serve, settings)
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
    return (with_flags(ApiSettings.from_env(), args), with_flags(ServerSettings.from_env(), args),
            with_flags(RemoteSettings.from_env(), args))


def auth_mode(transport: str, host: str, chosen: str | None) -> str:
    """`env` on a loopback address (and stdio), `request` on any other; `ValueError` says why a choice is refused."""
    if transport == "stdio":
        if chosen in PER_REQUEST:
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


def _checked(args: argparse.Namespace, api: ApiSettings, remote: RemoteSettings) -> tuple[str, HostPolicy | None]:
    """The auth mode, and over HTTP the Host and Origin policy; `ValueError` says which setting is refused and why."""
    auth = auth_mode(args.transport, args.host, remote.auth)
    if remote.metrics_port == args.port:
        raise ValueError(f"the metrics port must differ from --port ({args.port}): /metrics is served apart")
    if remote.body_bytes_held < remote.max_body_bytes:
        raise ValueError(f"AGENT_AUTOMATION_BODY_BYTES_HELD (--body-bytes-held, {remote.body_bytes_held:,}) must be "
                         f"at least AGENT_AUTOMATION_MAX_BODY_BYTES (--max-body-bytes, {remote.max_body_bytes:,}): a "
                         "body of the largest size must fit")
    policy = None
    if args.transport == "http":
        from .remote.forwarded import parse_proxies
        from .remote.hosts import HostPolicy

        policy = HostPolicy.build(args.host, remote.allowed_hosts, remote.allowed_origins)
        parse_proxies(remote.trusted_proxies)
        require_allowed_orgs(auth, args.host, remote)
    if auth == "oauth":
        from .remote.oauth.preflight import check_oauth_settings

        check_oauth_settings(remote)
    if args.transport == "http" and api.redis_url:
        require_shared_keys(remote)
    return auth, policy


def serve(args: argparse.Namespace) -> int:
    try:
        api, settings, remote = settings_from(args)
        auth, policy = _checked(args, api, remote)
        from . import tracing

        traces = tracing.start()  # the standard OTEL_* variables; off without them
    except ValueError as exc:
        say(f"error: {exc}", logging.ERROR)
        return 2
    if traces is not None:
        say(traces)
    with ExitStack() as stack:
        server, metrics = _server(args, _service(args, api, auth, stack), settings, remote, auth)
        serving()
        try:
            if args.transport == "http":
                assert policy is not None and metrics is not None
                _serve_http(args, server, remote, auth, policy, metrics)
            else:
                import anyio

                from .stdio import serve_stdio

                anyio.run(serve_stdio, server)
        except KeyboardInterrupt:
            pass
    return 0


def _server(args: argparse.Namespace, api: ApiSettings, settings: ServerSettings, remote: RemoteSettings,
            auth: str) -> tuple[AgentAutomationServer, AccessMetrics | None]:
    """The MCP server, and over HTTP the metrics it reports to."""
    from .server import build_server
    from .tools.callers import ConfiguredCaller, RequestCaller

    metrics = None
    if args.transport == "http":
        from .remote.access import AccessMetrics

        metrics = AccessMetrics()
    callers = RequestCaller() if auth in PER_REQUEST else ConfiguredCaller(api.token, api.org_id, settings.repo_id)
    if auth in PER_REQUEST and settings.repo_id is not None:
        logging.getLogger(__name__).warning("AGENT_AUTOMATION_REPO_ID (--repo-id) is not used with --auth %s: each "
                                            "caller names its own default repository with X-Repo-Id", auth)
    server = build_server(api, settings, log_level=args.log_level, max_tenant_calls=remote.max_tenant_calls,
                          callers=callers, observer=metrics, state_keys=remote.state_keys)
    logging.getLogger(__name__).info("toolsets %s%s: %s", ",".join(settings.toolsets),
                                     " (read-only)" if settings.read_only else "",
                                     ", ".join(spec.name for spec in server.tool_specs))
    return server, metrics


def _service(args: argparse.Namespace, api: ApiSettings, auth: str, stack: ExitStack) -> ApiSettings:
    """The service calls go to: with --sandbox, a simulator started in-process (and ended with `stack`)."""
    if args.sandbox:
        from .sandbox import SandboxConfig, SandboxServer

        sandbox = stack.enter_context(SandboxServer(SandboxConfig(rate_limits=api.rate_limits)))
        say(f"--sandbox: using the local simulator at {sandbox.url} (simulated runs, no real service, "
            + (f"clients send Authorization: Bearer {sandbox.token})" if auth != "env" else "no token needed)"))
        return dataclasses.replace(api, base_url=sandbox.url, token=sandbox.token, org_id=sandbox.org_id)
    if auth == "env" and not api.token:
        say("no API token: the tools are listed, but every call answers with how to set "
            "AGENT_AUTOMATION_API_TOKEN (or try --sandbox)")
    return api


def _http_warnings(host: str, remote: RemoteSettings, auth: str) -> Iterator[str]:
    """What a replica serving HTTP says at start about settings that work on one replica and fail on several."""
    from .remote.hosts import is_wildcard

    if is_wildcard(host) and not remote.allowed_hosts:
        yield (f"listening on {host} with no allowed hosts, so any Host header is accepted and DNS rebinding is not "
               "prevented; set --allowed-host (AGENT_AUTOMATION_ALLOWED_HOSTS) to the names clients use")
    if not logs.tenant_ids.shared:
        yield ("AGENT_AUTOMATION_LOG_SECRET is not set, so log lines name tenants with a key of this process only: "
               "the same tenant has another name on each replica and after a restart; set it to the same random "
               "value (openssl rand -hex 32) on every replica")
    if auth != "env" and not remote.state_keys:
        yield ("AGENT_AUTOMATION_STATE_KEYS is not set, so a confirmation's continuation, a task id"
               + (" and a sign-in's tokens" if auth == "oauth" else "") + " are sealed with a key of this process "
               "only: on another replica, or after a restart, they fail; set the same keys (openssl rand -hex 32) on "
               "every replica")


def _serve_http(args: argparse.Namespace, server: AgentAutomationServer, remote: RemoteSettings, auth: str,
                policy: HostPolicy, metrics: AccessMetrics) -> None:
    from .remote.hosts import bracketed
    from .remote.serve import run_http

    for warning in _http_warnings(args.host, remote, auth):
        say(f"warning: {warning}", logging.WARNING)
    who = {"request": "each request's own token (Authorization: Bearer)",
           "oauth": f"each caller's sign-in (OAuth, at {remote.public_url}) or own token",
           "env": "the token from the environment"}[auth]
    say(f"serving Streamable HTTP at http://{bracketed(args.host)}:{args.port}/mcp, calls made with {who}"
        + (f"; /metrics at port {remote.metrics_port}" if remote.metrics_port else ""))
    run_http(server, remote, host=args.host, port=args.port, policy=policy,
             per_request_auth=auth in PER_REQUEST, metrics=metrics)


def serving() -> None:
    """The start is over: the collector, off while `__main__` started the process, runs again, and leaves out for
    good what the start made (it lives as long as the process). Does nothing where the collector was on."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in (*COMMANDS, "-h", "--help", "--version"):
        argv.insert(0, "serve")  # the default command
    args = build_parser(argv[0]).parse_args(argv)
    try:
        log = with_flags(LogSettings.from_env(), args)
    except ValueError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    serving_http = args.command == "serve" and args.transport == "http"
    args.log_level = log.level or ("INFO" if serving_http else "WARNING")
    args.log_format = log.format or "text"
    configure(args.log_level, args.log_format)
    use_tenant_ids(TenantIds(log.secret))
    if args.command != "serve":
        serving()
    if args.command == "sandbox":
        from .sandbox.cli import run_sandbox

        return run_sandbox(args)
    if args.command == "demo":
        from .demo import run_demo

        return run_demo(args)
    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
