"""`agent-automation-mcp sandbox ...`: the flags and the blocking runner (the top-level CLI wires them in)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import uvicorn

from ..api.limits import parse_rate_limits
from .app import create_app
from .config import ALGORITHMS, DEMO_TOKEN, FAULT_RATES, LOGS_PATHS, Faults, SandboxConfig
from .server import bind_socket, uvicorn_config


def add_sandbox_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8787, help="port to listen on; 0 picks a free one "
                                                               "(default: %(default)s)")
    parser.add_argument("--token", dest="tokens", action="extend", nargs="+", metavar="T",
                        help=f"API tokens to accept, one user each: --token A B or --token A --token B "
                             f"(default: {DEMO_TOKEN})")
    parser.add_argument("--org-id", type=int, default=1, help="the demo organisation's id (default: %(default)s)")
    parser.add_argument("--visible-orgs", type=int, default=1,
                        help="organisations the tokens can see; one more exists that they cannot "
                             "(default: %(default)s)")
    parser.add_argument("--token-org", dest="token_orgs", action="append", metavar="T=ORG[,ORG]",
                        help="the organisations token T belongs to (repeatable); a token not named belongs to every "
                             "visible one, e.g. --visible-orgs 2 --token A B --token-org A=1 --token-org B=2")
    parser.add_argument("--rate-limits", metavar="SPEC",
                        help="override limits, e.g. standard=60/30s,agent_creation=10/60s,logs=60/60s")
    parser.add_argument("--rate-limit-algorithm", choices=ALGORITHMS, default="sliding-log",
                        help="how limits are enforced (default: %(default)s)")
    parser.add_argument("--retry-after", action=argparse.BooleanOptionalAction, default=True,
                        help="send a Retry-After header with 429 answers (default: on)")
    parser.add_argument("--run-seconds", type=float, default=20.0,
                        help="seconds from creating or resuming a run to its end (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the world and its randomness "
                                                            "(default: %(default)s)")
    parser.add_argument("--logs-paths", choices=LOGS_PATHS, default="both",
                        help="which logs paths exist: both, only the alpha one (like the real service) or only "
                             "the contract's (default: %(default)s)")
    parser.add_argument("--recent-runs", type=int, default=0, metavar="N",
                        help="N more runs in the demo organisation, spread over the day before the sandbox starts "
                             "(a day's work to list and count; default: %(default)s)")
    parser.add_argument("--max-runs", type=int, default=100_000,
                        help="runs an organisation may create before 402 (default: %(default)s)")
    parser.add_argument("--quirks", action="store_true",
                        help="mimic the real service where it breaks its own schema (string ids, string tool_output)")
    faults = parser.add_argument_group("fault injection (all off by default)")
    faults.add_argument("--latency", type=float, default=0.0, help="seconds added to every answer")
    faults.add_argument("--error-rate", type=float, default=0.0, help="share of requests answered 500")
    faults.add_argument("--drop-rate", type=float, default=0.0, help="share of connections closed unanswered")
    faults.add_argument("--malformed-rate", type=float, default=0.0, help="share of 200s with a broken JSON body")
    faults.add_argument("--throttle-rate", type=float, default=0.0, help="share of requests answered 429")
    faults.add_argument("--throttle-retry-after", type=float, default=0.0, metavar="SECONDS",
                        help="the Retry-After of those 429s (default: %(default)s)")
    faults.add_argument("--redirect-rate", type=float, default=0.0, help="share of requests answered 307 elsewhere")
    faults.add_argument("--empty-rate", type=float, default=0.0, help="share of 200s sent as a 202 without a body")
    faults.add_argument("--fault-operations", metavar="NAMES",
                        help="comma-separated operation names the faults apply to (default: all)")


def config_from_args(args: argparse.Namespace) -> SandboxConfig:
    operations = (frozenset(name.strip() for name in args.fault_operations.split(",") if name.strip())
                  if args.fault_operations else None)
    faults = Faults(latency=args.latency, **{name: getattr(args, name) for name in FAULT_RATES},
                    throttle_retry_after=args.throttle_retry_after, operations=operations)
    return SandboxConfig(tokens=tuple(args.tokens or (DEMO_TOKEN,)), org_id=args.org_id,
                         rate_limits=parse_rate_limits(args.rate_limits), algorithm=args.rate_limit_algorithm,
                         retry_after=args.retry_after, run_seconds=args.run_seconds, seed=args.seed,
                         logs_paths=args.logs_paths, visible_orgs=args.visible_orgs, faults=faults,
                         max_runs=args.max_runs, recent_runs=args.recent_runs, quirks=args.quirks,
                         token_orgs=_token_orgs(args.token_orgs or ()))


def _token_orgs(items: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """`T=1,2` items → {T: (1, 2)}; `ValueError` without quoting the token."""
    orgs: dict[str, tuple[int, ...]] = {}
    for item in items:
        token, _, ids = item.partition("=")
        try:
            orgs[token.strip()] = tuple(int(part) for part in ids.split(",") if part.strip())
        except ValueError:
            raise ValueError("--token-org takes TOKEN=ORG[,ORG], organisations as numbers") from None
    return orgs


def banner(config: SandboxConfig, url: str) -> str:
    others = f" (also accepted: {', '.join(config.tokens[1:])})" if len(config.tokens) > 1 else ""
    return "\n".join([
        f"Agent Automation sandbox listening on {url}",
        f"  API token: {config.token}{others}",
        f"  Org id:    {config.org_id}"
        + (f" (visible: {', '.join(map(str, config.visible_org_ids))})" if config.visible_orgs > 1 else "")
        + f"; org {config.forbidden_org_id} exists but is forbidden (403)",
        f"  Limits:    {config.algorithm}, " + ",".join(f"{k}={v}" for k, v in config.rate_limits.items()),
        "  Use it:",
        f"    AGENT_AUTOMATION_BASE_URL={url} AGENT_AUTOMATION_API_TOKEN={config.token} "
        f"AGENT_AUTOMATION_ORG_ID={config.org_id}",
        "  Controls:  GET /_sandbox/requests, PUT /_sandbox/faults, POST /_sandbox/runs, GET /_sandbox/state/prs",
    ])


def run_sandbox(args: argparse.Namespace) -> int:
    """Serve until interrupted. Returns the process exit code."""
    try:
        config = config_from_args(args)
    except ValueError as exc:
        print(f"sandbox: {exc}", file=sys.stderr)
        return 2
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as exc:
        print(f"sandbox: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(banner(config, f"http://{host}:{sock.getsockname()[1]}"), file=sys.stderr, flush=True)
    server = uvicorn.Server(uvicorn_config(create_app(config)))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agent-automation-mcp sandbox",
                                     description="A faithful in-memory simulator of the Agent Automation Service.")
    add_sandbox_arguments(parser)
    return run_sandbox(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
