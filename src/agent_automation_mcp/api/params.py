"""Bounds on what we send, defined once: the client validates with them and the tools advertise them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

Id = Annotated[int, Field(ge=1, description="A positive integer id.")]
Prompt = Annotated[str, Field(min_length=1, max_length=100_000, pattern=r"\S",
                              description="Instruction for the agent; must not be blank.")]
Skip = Annotated[int, Field(ge=0, description="How many items to skip (offset).")]
Limit = Annotated[int, Field(ge=1, le=100, description="How many items to return, 1 to 100.")]
CheckRetryCount = Annotated[int, Field(ge=0, le=10, description="Retries for failed checks, 0 to 10.")]
PullRequestState = Literal["open", "closed", "draft", "ready_for_review"]
AgentType = Literal["codegen", "claude_code"]
SourceType = Literal[
    "LOCAL", "SLACK", "GITHUB", "GITHUB_CHECK_SUITE", "GITHUB_PR_REVIEW", "LINEAR", "API", "CHAT", "JIRA",
    "CLICKUP", "MONDAY", "SETUP_COMMANDS",
]
Provider = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$",
                                description="OAuth provider name, e.g. github, linear, slack.")]
WebhookUrl = Annotated[str, Field(min_length=1, max_length=2083, pattern=r"^https?://\S+$",
                                  description="An http(s) URL.")]
