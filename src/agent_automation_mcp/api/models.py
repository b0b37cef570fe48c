"""The service's resources, read leniently.

The service drifts (an alpha logs endpoint, upper- and lower-case statuses, ids sent as strings,
timestamps without a zone), so models keep unknown fields, take open strings where the spec has
enums, and never reject a timestamp format. What we *send* is checked in `params.py` instead.
"""

from __future__ import annotations

import re
from typing import Any, Final, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, computed_field

from .statuses import is_finished

T = TypeVar("T")


class Resource(BaseModel):
    # Numbers where the spec says string (`github_id`, `github_user_id`) are taken as their text.
    model_config = ConfigDict(extra="allow", populate_by_name=True, coerce_numbers_to_str=True, defer_build=True)


# The 13 documented trace message types; others may appear (the endpoint is alpha).
MESSAGE_TYPES: Final = (
    "ACTION", "PLAN_EVALUATION", "FINAL_ANSWER", "ERROR", "USER_MESSAGE", "USER_GITHUB_ISSUE_COMMENT",
    "INITIAL_PR_GENERATION", "DETECT_PR_ERRORS", "FIX_PR_ERRORS", "PR_CREATION_FAILED", "PR_EVALUATION",
    "COMMIT_EVALUATION", "AGENT_RUN_LINK",
)


class Page(Resource, Generic[T]):
    items: list[T]
    total: int | None = None
    page: int | None = None
    size: int | None = None
    pages: int | None = None


class OrganizationSettings(Resource):
    enable_pr_creation: bool | None = None
    enable_rules_detection: bool | None = None


class Organization(Resource):
    id: int
    name: str | None = None
    settings: OrganizationSettings | None = None


class User(Resource):
    id: int
    github_user_id: str | None = None
    github_username: str | None = None
    email: str | None = None
    avatar_url: str | None = None
    full_name: str | None = None
    role: str | None = None
    is_admin: bool | None = None


class Repository(Resource):
    id: int
    name: str | None = None
    full_name: str | None = None
    description: str | None = None
    github_id: str | None = None
    organization_id: int | None = None
    visibility: str | None = None
    archived: bool | None = None
    setup_status: str | None = None
    language: str | None = None


class PullRequest(Resource):
    id: int
    created_at: str | None = None
    title: str | None = None
    url: str | None = None
    head_branch_name: str | None = None


_GITHUB_PR = re.compile(r"^https?://[^/\s]+/([^/\s]+/[^/\s]+)/pull/(\d+)(?:[/?#]\S*)?$")


def github_pull_request(url: str) -> tuple[str | None, int | None]:
    """`https://github.com/owner/repo/pull/7` -> ("owner/repo", 7); (None, None) for any other URL."""
    match = _GITHUB_PR.match(url.strip())
    return (match.group(1), int(match.group(2))) if match else (None, None)


class AgentRun(Resource):
    id: int
    organization_id: int | None = None
    status: str | None = None
    created_at: str | None = None
    web_url: str | None = None
    result: str | None = None
    summary: str | None = None
    source_type: str | None = None
    github_pull_requests: list[PullRequest] | None = None
    metadata: dict[str, Any] | None = None

    @computed_field  # type: ignore[prop-decorator]  # mypy takes no decorator over @property (as pydantic documents)
    @property
    def is_terminal(self) -> bool:
        """True once the run has finished (`statuses`: any ending, failures included), whatever the casing."""
        return is_finished(self.status)


class LogEntry(Resource):
    agent_run_id: int | None = None
    created_at: str | None = None
    message_type: str | None = Field(default=None, description=f"One of {', '.join(MESSAGE_TYPES)}, or newer.")
    thought: str | None = None
    tool_name: str | None = None
    tool_input: dict[str, Any] | str | None = None
    tool_output: dict[str, Any] | list[Any] | str | None = None
    observation: dict[str, Any] | list[Any] | str | None = None


class LogPage(Resource):
    """One page of a run's trace, with the run's own fields (`AgentRunWithLogsResponse`)."""

    id: int
    organization_id: int | None = None
    status: str | None = None
    created_at: str | None = None
    web_url: str | None = None
    result: str | None = None
    metadata: dict[str, Any] | None = None
    logs: list[LogEntry] = Field(default_factory=list)
    total_logs: int | None = None
    page: int | None = None
    size: int | None = None
    pages: int | None = None

    @computed_field  # type: ignore[prop-decorator]  # mypy takes no decorator over @property (as pydantic documents)
    @property
    def is_terminal(self) -> bool:
        return is_finished(self.status)


class IntegrationStatus(Resource):
    integration_type: str
    active: bool
    token_id: int | str | None = None
    installation_id: int | str | None = None
    metadata: dict[str, Any] | None = None


class Integrations(Resource):
    organization_id: int | None = None
    organization_name: str | None = None
    integrations: list[IntegrationStatus] = Field(default_factory=list)
    total_active_integrations: int | None = None


class ModelOption(Resource):
    label: str | None = None
    value: str


class ProviderModels(Resource):
    name: str
    models: list[ModelOption] = Field(default_factory=list)


class Models(Resource):
    providers: list[ProviderModels] = Field(default_factory=list)
    default_model: str | None = None


class OAuthProvider(Resource):
    id: int | str
    name: str
    issuer: str | None = None
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    default_scopes: list[str] | None = None
    is_mcp: bool | None = None
    meta: dict[str, Any] | None = None


class OAuthToken(Resource):
    """One of the user's OAuth connections. The spec leaves the shape open; a bare provider name is taken as one."""

    provider: str | None = None
    is_active: bool | None = None
    id: int | str | None = None
    created_at: str | None = None
    scopes: list[str] | None = None


class CliRules(Resource):
    organization_rules: str | None = None
    user_custom_prompt: str | None = None


class CheckSuiteSettings(Resource):
    check_retry_count: int | None = None
    ignored_checks: list[str] = Field(default_factory=list)
    check_retry_counts: dict[str, Any] = Field(default_factory=dict)
    custom_prompts: dict[str, Any] = Field(default_factory=dict)
    high_priority_apps: list[str] = Field(default_factory=list)
    available_check_suite_names: list[str] = Field(default_factory=list)


class PullRequestEdit(Resource):
    success: bool
    url: str | None = None
    number: int | None = None
    title: str | None = None
    state: str | None = None
    error: str | None = None


class SetupCommands(Resource):
    agent_run_id: int
    status: str | None = None
    url: str | None = None


class LogAnalysis(Resource):
    agent_run_id: int
    status: str | None = None
    message: str | None = None


class WebhookConfig(Resource):
    url: str | None = None
    enabled: bool | None = None
    has_secret: bool | None = None


class WebhookOverride(BaseModel):
    """Sent, not read: strict."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # built when a run is first sent one
    url: str = Field(min_length=1, max_length=2083, pattern=r"^https?://\S+$")
    secret: str | None = None
