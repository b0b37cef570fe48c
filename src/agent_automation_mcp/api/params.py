"""Bounds on what we send, defined once: the client validates with them and the tools advertise them."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field


def _refuse_bool(value: Any) -> Any:
    """Lax integers take `true` as 1; a boolean where a number belongs is a mistake worth naming."""
    if isinstance(value, bool):
        raise ValueError("expected a number, not a boolean")
    return value


NOT_BOOL = BeforeValidator(_refuse_bool)  # after the Field, so the schema keeps its minimum and maximum
Id = Annotated[int, Field(ge=1, description="A positive integer id."), NOT_BOOL]
Prompt = Annotated[str, Field(min_length=1, max_length=100_000, pattern=r"\S",
                              description="Instruction for the agent; must not be blank.")]
Skip = Annotated[int, Field(ge=0, description="How many items to skip (offset)."), NOT_BOOL]
Limit = Annotated[int, Field(ge=1, le=100, description="How many items to return, 1 to 100."), NOT_BOOL]
CheckRetryCount = Annotated[int, Field(ge=0, le=10, description="Retries for failed checks, 0 to 10."), NOT_BOOL]
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

MAX_METADATA_CHARS = 4000


def _small_json(value: dict[str, Any]) -> dict[str, Any]:
    if len(json.dumps(value, ensure_ascii=False, separators=(",", ":"))) > MAX_METADATA_CHARS:
        raise ValueError(f"metadata must be at most {MAX_METADATA_CHARS} characters of JSON")
    return value


# What a run is created with beyond its prompt (the service's `metadata` and `images`), bounded.
Metadata = Annotated[dict[str, Any], Field(max_length=20), AfterValidator(_small_json)]
ImageDataUri = Annotated[str, Field(max_length=5_000_000, pattern=r"^data:image/[\w.+-]+;base64,[\w+/=]+$")]
Images = Annotated[list[ImageDataUri], Field(min_length=1, max_length=4)]
