"""What a request refused before any tool runs is answered: its HTTP status, a body in the one error shape
(`{"error": {"kind", "status", "message", "retry_after_seconds"?, "hint"}}`) and headers. The gate and the
sign-in's check of our access tokens both answer this way, so a client reads every refusal alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Refused = tuple[int, dict[str, Any], Mapping[str, str]]


def error_body(kind: str, status: int, message: str, hint: str, *,
               retry_after: int | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"kind": kind, "status": status, "message": message}
    if retry_after is not None:
        error["retry_after_seconds"] = retry_after
    return {"error": {**error, "hint": hint}}
