"""What the sandbox's world is made of: organisations, users, repositories and their check-suite settings,
pull requests, OAuth tokens, log sandboxes and webhooks (agent runs are in `lifecycle`, with their clock)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

AVAILABLE_CHECKS: Final = ("build", "lint", "unit-tests", "e2e", "security-scan")  # what check suites may name


@dataclass
class Organization:
    id: int
    name: str
    member_ids: list[int]
    accessible: bool
    enable_pr_creation: bool = True
    enable_rules_detection: bool = True
    organization_rules: str | None = None


@dataclass
class User:
    id: int
    github_username: str
    full_name: str
    role: str = "MEMBER"
    custom_prompt: str | None = None

    @property
    def github_user_id(self) -> str:
        return str(9_000_000 + self.id)


@dataclass
class CheckSuiteSettings:
    check_retry_count: int = 3
    ignored_checks: list[str] = field(default_factory=list)
    check_retry_counts: dict[str, int] = field(default_factory=dict)
    custom_prompts: dict[str, str] = field(default_factory=dict)
    high_priority_apps: list[str] = field(default_factory=list)


@dataclass
class Repository:
    id: int
    organization_id: int
    name: str
    owner: str
    language: str | None
    writer_ids: set[int]
    description: str | None = None
    visibility: str = "PRIVATE"
    archived: bool = False
    setup_status: str = "COMPLETED"
    check_suite: CheckSuiteSettings = field(default_factory=CheckSuiteSettings)
    next_pr_number: int = 1

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass
class PullRequest:
    id: int
    repo_id: int
    number: int
    title: str
    url: str
    head_branch_name: str
    created_at: str
    state: str = "open"  # open | closed | draft | ready_for_review
    merged: bool = False
    url_ban: bool = False  # a ban flag set on the pull request's URL
    parent_run_ban: int | None = None  # a ban set through a parent agent run (its id)
    run_ids: list[int] = field(default_factory=list)

    @property
    def banned(self) -> bool:
        return self.url_ban or self.parent_run_ban is not None


@dataclass
class OAuthToken:
    id: int
    user_id: int
    organization_id: int
    provider: str
    is_active: bool
    created_at: str
    scopes: list[str]


@dataclass
class LogSandbox:
    """A sandbox (execution environment) whose logs `analyze_sandbox_logs` reads; not an agent run."""

    id: int
    organization_id: int
    has_logs: bool


@dataclass
class Webhook:
    url: str | None = None
    secret: str | None = None
    enabled: bool = False
