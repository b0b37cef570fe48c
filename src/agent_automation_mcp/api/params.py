"""Bounds on what we send, defined once: the client validates with them and the tools advertise them.

Every string and list a caller may send has a bound the service could accept, so nothing oversized is
forwarded; every integer is strict (decimal digits, within int64), so nothing is guessed at.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BeforeValidator, Field

INT64_MAX: Final = 2**63 - 1
_DIGITS = re.compile(r"[0-9]{1,19}")


def _strict_int(value: Any) -> Any:
    """A whole number as JSON sends it, or its decimal digits quoted ("42"); nothing else is read as one.

    Lax integers would take `true` as 1, `"4_2"` and `" 42 "` as 42 and `42.0` as 42: each is a mistake
    worth naming rather than a number to guess.
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("expected a whole number")
    if isinstance(value, str):
        if not _DIGITS.fullmatch(value):
            raise ValueError("expected a whole number written in decimal digits only")
        value = int(value)
    if not -INT64_MAX - 1 <= value <= INT64_MAX:  # here rather than in every schema: 19 digits cost tokens
        raise ValueError("expected a whole number within 64 bits")
    return value


STRICT_INT = BeforeValidator(_strict_int)  # after the Field, so the schema keeps its minimum and maximum
Id = Annotated[int, Field(ge=1), STRICT_INT]  # type and minimum say it all: no description to pay for
Prompt = Annotated[str, Field(min_length=1, max_length=100_000, pattern=r"\S",
                              description="Instruction for the agent.")]
Skip = Annotated[int, Field(ge=0, le=1_000_000, description="How many items to skip (offset)."), STRICT_INT]
Limit = Annotated[int, Field(ge=1, le=100, description="How many items to return, 1 to 100."), STRICT_INT]
RetryCount = Annotated[int, Field(ge=0, le=10), STRICT_INT]  # a check's retries; undescribed, as a map's values
CheckRetryCount = Annotated[RetryCount, Field(description="Retries for failed checks, 0 to 10.")]
# A check or GitHub App name as GitHub shows it, and how many of them one setting may list.
CheckName = Annotated[str, Field(min_length=1, max_length=200)]
MAX_CHECKS: Final = 100
CheckLists = Annotated[list[CheckName], Field(max_length=MAX_CHECKS)]
CheckRetryCounts = Annotated[dict[CheckName, CheckRetryCount], Field(max_length=MAX_CHECKS)]
CheckPrompt = Annotated[str, Field(max_length=10_000)]  # a check's fix instructions
CheckPrompts = Annotated[dict[CheckName, CheckPrompt], Field(max_length=MAX_CHECKS)]
CardOrderId = Annotated[str, Field(max_length=200)]
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
# Keys and values a run's metadata must hold to be listed: the same bounds, and at least one pair.
MetadataMatch = Annotated[dict[str, Any], Field(min_length=1, max_length=20), AfterValidator(_small_json)]
ImageDataUri = Annotated[str, Field(max_length=5_000_000, pattern=r"^data:image/[\w.+-]+;base64,[\w+/=]+$")]
Images = Annotated[list[ImageDataUri], Field(min_length=1, max_length=4)]
WebhookSecret = Annotated[str, Field(max_length=500)]
ModelName = Annotated[str, Field(min_length=1, max_length=200)]
TriggerSource = Annotated[str, Field(max_length=200)]
