"""The one table of the service's operations.

The client sends through it, the pacer charges its buckets, the tools take their annotations from it
and the sandbox serves its paths. Nothing else restates a method, a path or a rate-limit bucket.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Final, Literal

from .limits import (
    AGENT_CREATION,
    CLI_RULES,
    DEFAULT_RATE_LIMITS,
    LOG_ANALYSIS,
    LOGS,
    PR_EDIT,
    SETUP_COMMANDS,
    STANDARD,
    WEBHOOK_TEST,
)

HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
_PATH_PARAM = re.compile(r"\{([a-z_]+)\}")


class RunEffect(Enum):
    """What an operation does to an agent run, said on its line of the table (`run=`): every write says it, a read
    does nothing to one. The server treats a tool by it: a tool that sets a run going is offered as a task and names
    the run in its result (`run_field`); a task's cancel sends an operation that stops one; while none does, the
    tools, the instructions and a task's cancel say what comes closest (`tools/checks.py`)."""

    NOTHING = "does nothing to an agent run"
    STARTS = "starts an agent run"  # and its answer names the run it started
    CONTINUES = "sets an agent run going again"  # and its answer names the run
    STOPS = "stops an agent run"  # the run it is sent for, and nothing else: what a task's cancel may send

    @property
    def sets_going(self) -> bool:
        """It starts a run or sets one going again: a task follows the run its answer names."""
        return self in (RunEffect.STARTS, RunEffect.CONTINUES)


@dataclass(frozen=True, slots=True)
class Operation:
    """One API operation, described once.

    `retry_safe`: sending it twice does no harm (reads and the check-suite PUT), so connection
    errors and 5xx may be retried. Anything else is sent at most once once it may have arrived.
    `fallback_path`: a second path the real service is known to serve the same operation on.
    `run`: what it does to an agent run (`RunEffect`); a read does nothing to one.
    """

    name: str
    method: HttpMethod
    path: str
    operation_id: str
    buckets: tuple[str, ...]
    retry_safe: bool
    read_only: bool
    destructive: bool = False
    query: tuple[str, ...] = ()
    body: bool = False
    fallback_path: str | None = None
    run: RunEffect = RunEffect.NOTHING
    path_params: tuple[str, ...] = field(init=False, repr=False, compare=False)  # read on every send: found once

    def __post_init__(self) -> None:
        object.__setattr__(self, "path_params", tuple(_PATH_PARAM.findall(self.path)))
        if self.read_only and self.run is not RunEffect.NOTHING:
            raise ValueError(f"{self.name} is a read, yet says it {self.run.value}: a read does nothing to a run "
                             "(leave run= out of its line in api/operations.py)")

    @property
    def needs_org(self) -> bool:
        """Sent for one organisation: its id goes in the path (or, for a few, the query)."""
        return "org_id" in self.path_params or "org_id" in self.query

    @property
    def idempotent(self) -> bool:
        """Repeating it with the same arguments leaves the same state (what MCP's idempotentHint means)."""
        return self.read_only or self.retry_safe or self.name in _IDEMPOTENT_WRITES


_ORG = "/v1/organizations/{org_id}"
_RUN = f"{_ORG}/agent/run"
_PAGING = ("skip", "limit")
_STD = (STANDARD,)

# Writes that are not safe to *retry blindly* (the outcome of a lost response is unknown) but that
# converge: doing them twice leaves the same state as doing them once.
_IDEMPOTENT_WRITES: Final = frozenset(
    {"ban_checks", "unban_checks", "remove_from_pull_request", "edit_pull_request_simple", "edit_pull_request",
     "revoke_oauth_tokens", "set_webhook", "delete_webhook"}
)


def _read(name: str, path: str, operation_id: str, *, query: tuple[str, ...] = (),
          buckets: tuple[str, ...] = _STD, fallback_path: str | None = None) -> Operation:
    return Operation(name, "GET", path, operation_id, buckets, retry_safe=True, read_only=True, query=query,
                     fallback_path=fallback_path)


def _write(name: str, method: HttpMethod, path: str, operation_id: str, *, run: RunEffect,
           buckets: tuple[str, ...] = _STD, destructive: bool = False, query: tuple[str, ...] = (),
           body: bool = True) -> Operation:
    """A write that may not be sent twice blindly; it says what it does to an agent run (`run`), even nothing."""
    return Operation(name, method, path, operation_id, buckets, retry_safe=False, read_only=False,
                     destructive=destructive, query=query, body=body, run=run)


OPERATIONS: Final[MappingProxyType[str, Operation]] = MappingProxyType({op.name: op for op in (
    # Organisation data
    _read("list_organizations", "/v1/organizations", "get_organizations_v1_organizations_get", query=_PAGING),
    _read("get_current_user", "/v1/users/me", "get_current_user_info_v1_users_me_get"),
    _read("list_users", f"{_ORG}/users", "get_users_v1_organizations__org_id__users_get", query=_PAGING),
    _read("get_user", f"{_ORG}/users/{{user_id}}", "get_user_v1_organizations__org_id__users__user_id__get"),
    _read("list_repositories", f"{_ORG}/repos", "get_repositories_v1_organizations__org_id__repos_get",
          query=_PAGING),
    _read("list_integrations", f"{_ORG}/integrations",
          "get_organization_integrations_endpoint_v1_organizations__org_id__integrations_get"),
    _read("list_models", f"{_ORG}/models", "get_available_models_v1_organizations__org_id__models_get"),
    _read("list_mcp_providers", "/v1/mcp-providers", "get_mcp_providers_v1_mcp_providers_get"),
    _read("get_cli_rules", f"{_ORG}/cli/rules", "get_cli_rules_v1_organizations__org_id__cli_rules_get",
          buckets=(CLI_RULES, STANDARD)),
    # Agent runs
    _write("create_agent_run", "POST", _RUN, "create_agent_run_v1_organizations__org_id__agent_run_post",
           run=RunEffect.STARTS, buckets=(AGENT_CREATION, STANDARD)),
    _read("get_agent_run", f"{_RUN}/{{agent_run_id}}",
          "get_agent_run_v1_organizations__org_id__agent_run__agent_run_id__get"),
    _read("list_agent_runs", f"{_ORG}/agent/runs", "list_agent_runs_v1_organizations__org_id__agent_runs_get",
          query=("user_id", "source_type", *_PAGING)),
    _write("resume_agent_run", "POST", f"{_RUN}/resume",
           "resume_agent_run_v1_organizations__org_id__agent_run_resume_post", run=RunEffect.CONTINUES),
    # The alpha path first: it is the one the real service is known to serve (the OpenAPI's); the contract's path
    # is the fallback, used from the first 404 for the route on (see the transport).
    _read("get_agent_run_logs", "/v1/alpha/organizations/{org_id}/agent/run/{agent_run_id}/logs",
          "get_agent_run_logs_v1_alpha_organizations__org_id__agent_run__agent_run_id__logs_get",
          query=("skip", "limit", "reverse"), buckets=(LOGS, STANDARD), fallback_path=f"{_RUN}/{{agent_run_id}}/logs"),
    # Checks and pull requests. A ban stops the agents of a run's pull request as it bans its checks: not a stop
    # (a task's cancel must not ban a pull request's checks), and a run without a pull request goes on.
    _write("ban_checks", "POST", f"{_RUN}/ban",
           "ban_all_checks_for_agent_run_v1_organizations__org_id__agent_run_ban_post", run=RunEffect.NOTHING,
           destructive=True),
    _write("unban_checks", "POST", f"{_RUN}/unban",
           "unban_all_checks_for_agent_run_v1_organizations__org_id__agent_run_unban_post", run=RunEffect.NOTHING),
    _write("remove_from_pull_request", "POST", f"{_RUN}/remove-from-pr",
           "remove_codegen_from_pr_v1_organizations__org_id__agent_run_remove_from_pr_post", run=RunEffect.NOTHING,
           destructive=True),
    _write("edit_pull_request_simple", "PATCH", f"{_ORG}/prs/{{pr_id}}",
           "edit_pull_request_simple_v1_organizations__org_id__prs__pr_id__patch", run=RunEffect.NOTHING,
           buckets=(PR_EDIT, STANDARD), destructive=True),
    _write("edit_pull_request", "PATCH", f"{_ORG}/repos/{{repo_id}}/prs/{{pr_id}}",
           "edit_pull_request_v1_organizations__org_id__repos__repo_id__prs__pr_id__patch", run=RunEffect.NOTHING,
           buckets=(PR_EDIT, STANDARD), destructive=True),
    # Check-suite settings
    _read("get_check_suite_settings", f"{_ORG}/repos/check-suite-settings",
          "get_check_suite_settings_v1_organizations__org_id__repos_check_suite_settings_get", query=("repo_id",)),
    Operation("update_check_suite_settings", "PUT", f"{_ORG}/repos/check-suite-settings",
              "update_check_suite_settings_v1_organizations__org_id__repos_check_suite_settings_put", _STD,
              retry_safe=True, read_only=False, query=("repo_id",), body=True),
    # Setup and sandbox-log analysis (each starts an agent run)
    _write("generate_setup_commands", "POST", f"{_ORG}/setup-commands/generate",
           "generate_setup_commands_v1_organizations__org_id__setup_commands_generate_post",
           run=RunEffect.STARTS, buckets=(SETUP_COMMANDS, STANDARD)),
    _write("analyze_sandbox_logs", "POST", f"{_ORG}/sandbox/{{sandbox_id}}/analyze-logs",
           "analyze_sandbox_logs_v1_organizations__org_id__sandbox__sandbox_id__analyze_logs_post",
           run=RunEffect.STARTS, buckets=(LOG_ANALYSIS, STANDARD), body=False),
    # OAuth tokens
    _read("get_oauth_token_status", "/v1/oauth/tokens/status", "get_oauth_token_status_v1_oauth_tokens_status_get",
          query=("org_id",)),
    _write("revoke_oauth_tokens", "POST", "/v1/oauth/tokens/revoke", "revoke_oauth_token_v1_oauth_tokens_revoke_post",
           run=RunEffect.NOTHING, destructive=True, query=("provider", "org_id"), body=False),
    # Agent-run completion webhook
    _read("get_webhook", f"{_ORG}/webhooks/agent-run",
          "get_webhook_config_v1_organizations__org_id__webhooks_agent_run_get"),
    _write("set_webhook", "POST", f"{_ORG}/webhooks/agent-run",
           "set_webhook_config_v1_organizations__org_id__webhooks_agent_run_post", run=RunEffect.NOTHING),
    _write("delete_webhook", "DELETE", f"{_ORG}/webhooks/agent-run",
           "delete_webhook_config_v1_organizations__org_id__webhooks_agent_run_delete", run=RunEffect.NOTHING,
           destructive=True, body=False),
    _write("test_webhook", "POST", f"{_ORG}/webhooks/agent-run/test",
           "test_webhook_v1_organizations__org_id__webhooks_agent_run_test_post", run=RunEffect.NOTHING,
           buckets=(WEBHOOK_TEST, STANDARD)),
)})

# The operations that stop an agent run (`RunEffect.STOPS`): none while the service offers no way to, and then the
# tools, the instructions and a task's cancel say what comes closest (`tools/checks.py`, `CLOSEST_TO_CANCEL`).
RUN_STOPPERS: Final = tuple(name for name, op in OPERATIONS.items() if op.run is RunEffect.STOPS)

# Operations of the reference OpenAPI that we deliberately do not offer, and why.
EXCLUDED_OPERATIONS: Final[MappingProxyType[str, str]] = MappingProxyType({
    "generate_slack_connect_token_endpoint_v1_slack_connect_generate_token_post":
        "mints a single-use Slack-connection secret for a browser sign-in flow; handing a credential to a "
        "model is a leak, and there is nothing an assistant can do with it",
})


def parse_bucket_map(spec: str | None) -> dict[str, tuple[str, ...]]:
    """`get_agent_run_logs=logs+standard,create_agent_run=agent_creation` -> {operation: buckets}.

    Only the operations named change; the rest keep the table's buckets. Unknown names are refused so a
    typo cannot silently leave an operation charged to the wrong buckets.
    """
    overrides: dict[str, tuple[str, ...]] = {}
    for item in (spec or "").split(","):
        if not item.strip():
            continue
        name, sep, value = (part.strip() for part in item.partition("="))
        buckets = tuple(dict.fromkeys(b.strip() for b in value.split("+") if b.strip()))
        if not sep or not buckets:
            raise ValueError(f"bad bucket-map item {item.strip()!r}: expected operation=bucket+bucket, "
                             f"e.g. get_agent_run_logs=logs+standard")
        if name not in OPERATIONS:
            raise ValueError(f"unknown operation {name!r} in the bucket map")
        unknown = [b for b in buckets if b not in DEFAULT_RATE_LIMITS]
        if unknown:
            raise ValueError(f"unknown rate-limit bucket(s) {', '.join(unknown)} for {name}; "
                             f"known: {', '.join(sorted(DEFAULT_RATE_LIMITS))}")
        overrides[name] = buckets
    return overrides
