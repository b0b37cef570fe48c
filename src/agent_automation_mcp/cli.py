"""The command line: `serve` (the default), `sandbox` and `demo`.

stdout belongs to the MCP protocol on stdio, so everything this program says goes to stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import logging
import sys
from collections.abc import Sequence
from typing import Final

from . import __version__
from .api.limits import parse_rate_limits
from .api.settings import ApiSettings, parse_org_id
from .config import TOOLSETS, ServerSettings, parse_toolsets

PROG: Final = "agent-automation-mcp"
COMMANDS: Final = ("serve", "sandbox", "demo")
LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def configure_logging(level: str) -> None:
    """Before the SDK's own `basicConfig`, so ours wins: plain lines on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if level != "DEBUG":  # one line per HTTP request is debugging detail
        for name in ("httpx2", "httpcore", "mcp"):
            logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level)))


def _port(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a number from 1 to 65535, got {value!r}")
    return int(value)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _add_server_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                        help="stdio (default) or Streamable HTTP at /mcp")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8000, help="HTTP port (default 8000)")
    parser.add_argument("--sandbox", action="store_true",
                        help="start the local simulator in-process and use it instead of the real service")
    parser.add_argument("--toolsets", help=f"comma-separated, from: {', '.join(TOOLSETS)}, all, default "
                                           "(default: all but oauth and webhooks; env AGENT_AUTOMATION_TOOLSETS)")
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
    common.add_argument("--log-level", choices=LOG_LEVELS, default="WARNING", type=str.upper,
                        help="stderr log level (default WARNING)")
    parser = argparse.ArgumentParser(
        prog=PROG, description="MCP server for the Agent Automation Service (Codegen's API).",
        epilog="Without a command, `serve` runs. The API token comes from AGENT_AUTOMATION_API_TOKEN.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="{serve,sandbox,demo}")
    serve = commands.add_parser("serve", parents=[common], help="run the MCP server (the default)")
    _add_server_arguments(serve)
    sandbox = commands.add_parser("sandbox", parents=[common], help="run the local simulator of the service")
    if command == "sandbox":
        from .sandbox.cli import add_sandbox_arguments

        add_sandbox_arguments(sandbox)
    demo = commands.add_parser("demo", parents=[common],
                               help="walk through a session against the sandbox with a real MCP client")
    demo.add_argument("--run-seconds", type=float, default=4.0, help="how long the demo's agent run takes")
    return parser


def settings_from(args: argparse.Namespace) -> tuple[ApiSettings, ServerSettings]:
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
    return api, server


def serve(args: argparse.Namespace) -> int:
    from contextlib import ExitStack

    import anyio

    try:
        api, settings = settings_from(args)
    except ValueError as exc:
        say(f"error: {exc}")
        return 2
    with ExitStack() as stack:
        if args.sandbox:
            from .sandbox import SandboxConfig, SandboxServer

            sandbox = stack.enter_context(SandboxServer(SandboxConfig(rate_limits=api.rate_limits)))
            api = dataclasses.replace(api, base_url=sandbox.url, token=sandbox.token, org_id=sandbox.org_id)
            say(f"--sandbox: using the local simulator at {sandbox.url} (simulated runs, no real service, "
                "no token needed)")
        elif not api.token:
            say("no API token: the tools are listed, but every call answers with how to set "
                "AGENT_AUTOMATION_API_TOKEN (or try --sandbox)")
        from .server import build_server

        server = build_server(api, settings, log_level=args.log_level)
        tools = ", ".join(spec.name for spec in server.tool_specs)
        logging.getLogger(__name__).info("toolsets %s%s: %s", ",".join(settings.toolsets),
                                         " (read-only)" if settings.read_only else "", tools)
        try:
            if args.transport == "http":
                if not is_loopback(args.host):
                    say(f"warning: listening on {args.host}, beyond this machine. The server has no authentication "
                        "of its own: whoever reaches the port acts with the configured API token. Put it behind an "
                        "authenticating proxy, or listen on 127.0.0.1.")
                say(f"serving Streamable HTTP at http://{args.host}:{args.port}/mcp")
                anyio.run(lambda: server.run_streamable_http_async(host=args.host, port=args.port))
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
    configure_logging(args.log_level)
    if args.command == "sandbox":
        from .sandbox.cli import run_sandbox

        return run_sandbox(args)
    if args.command == "demo":
        from .demo import run_demo

        return run_demo(args)
    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
