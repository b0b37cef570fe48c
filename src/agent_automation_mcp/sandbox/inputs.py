"""The request shapes of the reference OpenAPI as pydantic models (lax, like FastAPI: `"5"` is an int)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AnyUrl, BaseModel, ConfigDict, Field, UrlConstraints

SourceType = Literal["LOCAL", "SLACK", "GITHUB", "GITHUB_CHECK_SUITE", "GITHUB_PR_REVIEW", "LINEAR", "API", "CHAT",
                     "JIRA", "CLICKUP", "MONDAY", "SETUP_COMMANDS"]
WebhookUrl = Annotated[AnyUrl, UrlConstraints(max_length=2083)]


class Input(BaseModel):
    model_config = ConfigDict(extra="ignore")


# -- query strings -----------------------------------------------------------------------------------------

class Paging(Input):
    skip: int = Field(0, ge=0)
    limit: int = Field(100, ge=1, le=100)


class RunFilters(Paging):
    user_id: int | None = None
    source_type: SourceType | None = None


class LogsQuery(Paging):
    reverse: bool = False


class RepoQuery(Input):
    repo_id: int


class OrgQuery(Input):
    org_id: int


class RevokeQuery(Input):
    provider: str
    org_id: int


# -- bodies ------------------------------------------------------------------------------------------------

class WebhookOverride(Input):
    url: str
    secret: str | None = None


class CreateAgentRunInput(Input):
    prompt: str
    images: list[str] | None = None
    metadata: dict[str, Any] | None = None
    repo_id: int | None = None
    model: str | None = None
    agent_type: Literal["codegen", "claude_code"] | None = None
    webhooks: list[WebhookOverride] | None = None


class ResumeAgentRunInput(Input):
    agent_run_id: int
    prompt: str
    images: list[str] | None = None
    model: str | None = None
    webhooks: list[WebhookOverride] | None = None


class StopAgentRunInput(Input):
    agent_run_id: int
    before_card_order_id: str | None = None
    after_card_order_id: str | None = None


class EditPRInput(Input):
    state: Literal["open", "closed", "draft", "ready_for_review"]


class CheckSuiteSettingsRequest(Input):
    check_retry_count: int | None = Field(None, ge=0, le=10)
    ignored_checks: list[str] | None = None
    check_retry_counts: dict[str, int] | None = None
    custom_prompts: dict[str, str] | None = None
    high_priority_apps: list[str] | None = None


class GenerateSetupCommandsInput(Input):
    repo_id: int
    prompt: str | None = None
    trigger_source: str = "setup-commands"


class WebhookConfigRequest(Input):
    url: WebhookUrl
    secret: str | None = None
    enabled: bool = True


class WebhookTestRequest(Input):
    url: WebhookUrl
