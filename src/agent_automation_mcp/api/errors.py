"""A short hierarchy of typed API errors.

Each carries what a caller (a person or a model) needs to act: a stable `kind`, the HTTP status if
there was one, a message taken from the service, a retry hint and, for 422, the validation details.
No error ever holds the API token.
"""

from __future__ import annotations

from typing import Any, ClassVar


class ApiError(Exception):
    kind: ClassVar[str] = "api_error"
    default_hint: ClassVar[str] = "Check the arguments and try again."

    def __init__(self, message: str, *, status: int | None = None, details: Any = None,
                 retry_after: float | None = None, hint: str | None = None, operation: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.details = details
        self.retry_after = retry_after
        self.hint = hint or self.default_hint
        self.operation = operation

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status!r}, message={self.message!r})"


class InvalidRequestError(ApiError):
    """Refused before sending: an argument is out of bounds or missing."""

    kind = "invalid_arguments"
    default_hint = "Fix the arguments named in the message; nothing was sent."


class ConfigurationError(ApiError):
    kind = "configuration"
    default_hint = "Set AGENT_AUTOMATION_API_TOKEN (and AGENT_AUTOMATION_ORG_ID), or start with --sandbox to try it."


class BadRequestError(ApiError):
    kind = "bad_request"


class AuthenticationError(ApiError):
    kind = "unauthorized"
    default_hint = "The API token is missing, invalid or revoked; create a new one at https://codegen.com/token."


class QuotaExceededError(ApiError):
    kind = "quota_exceeded"
    default_hint = "The organisation's plan allows no more agent runs now; retrying will not help."


class PermissionDeniedError(ApiError):
    kind = "forbidden"
    default_hint = "The token has no access to this organisation or repository; check the org id."


class NotFoundError(ApiError):
    kind = "not_found"
    default_hint = "Check the id; list the resources to find valid ones."


class ValidationFailedError(ApiError):
    kind = "validation"
    default_hint = "The service rejected the arguments; see details for each field."


class RateLimitError(ApiError):
    """A limit refused the request: the service's (its 429) or this server's pacing of it. `limits` names the buckets
    it is about; `shared_by` (filled in by the transport) the operations counted against each, so the tool's answer
    can say which other tools wait too."""

    kind = "rate_limited"
    default_hint = "Wait retry_after_seconds, then call again."

    def __init__(self, message: str, *, limits: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.limits = limits
        self.shared_by: dict[str, frozenset[str]] = {}


class ServerError(ApiError):
    kind = "server_error"
    default_hint = "The service failed; try again in a moment."


class ApiTimeoutError(ApiError):
    kind = "timeout"
    default_hint = "The service did not answer in time; try again."


class ConnectionFailedError(ApiError):
    kind = "connection"
    default_hint = "Could not reach the service; check AGENT_AUTOMATION_BASE_URL and the network."


class OutcomeUnknownError(ApiError):
    """A request that changes something may have reached the service, but no answer came back."""

    kind = "outcome_unknown"
    default_hint = ("It may or may not have taken effect. Check with a get or list call before trying again, "
                    "so nothing is done twice.")
    # For a write that converges (doing it twice leaves the same state as once), no tool may read the state,
    # and none needs to: the same call again settles it.
    idempotent_hint = "It may or may not have taken effect; repeating the same call is safe (it does nothing twice)."


class UnexpectedStatusError(ApiError):
    """A status this client has no meaning for (a redirect, 1xx, an unlisted 4xx): never taken as success."""

    kind = "unexpected_status"
    default_hint = "The service answered with a status this server does not expect; check the base URL, or report it."


class UnexpectedResponseError(ApiError):
    kind = "bad_response"
    default_hint = "The service answered with something we could not read; try again or report it."


class OperationFailedError(ApiError):
    """The service answered 200 but said the operation did not succeed (edit PR `success: false`)."""

    kind = "operation_failed"
    default_hint = "Read the message; the pull request may be in a state that forbids this change."


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    402: QuotaExceededError,
    403: PermissionDeniedError,
    404: NotFoundError,
    422: ValidationFailedError,
    429: RateLimitError,
}


def error_class_for_status(status: int) -> type[ApiError]:
    if status >= 500:
        return ServerError
    return _BY_STATUS.get(status, UnexpectedStatusError)
