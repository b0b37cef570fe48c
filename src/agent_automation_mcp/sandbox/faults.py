"""Which fault, if any, hits a request; the dice come from the sandbox's seeded random generator."""

from __future__ import annotations

import random
from typing import Any, Literal

from .config import Faults

Fault = Literal["error", "drop", "malformed", "rate_limited"]


def choose_fault(faults: Faults, operation: str, rng: random.Random) -> Fault | None:
    """One roll decides among a 500, a dropped connection, a broken body and a 429 (in that order of precedence)."""
    rates = (faults.error_rate, faults.drop_rate, faults.malformed_rate, faults.rate_limited_rate)
    if not faults.applies_to(operation) or not any(rates):
        return None
    roll = rng.random()
    if roll < faults.error_rate:
        return "error"
    if roll < faults.error_rate + faults.drop_rate:
        return "drop"
    if roll < faults.error_rate + faults.drop_rate + faults.malformed_rate:
        return "malformed"
    if roll < sum(rates):
        return "rate_limited"
    return None


def malformed(body: bytes) -> bytes:
    """A truncated JSON text (never valid JSON: an object or array cut before its closing bracket)."""
    return body[: max(1, len(body) // 2)] if len(body) > 1 else b"{"


def faults_from_json(data: object) -> Faults:
    """The `PUT /_sandbox/faults` body: any of the `Faults` fields; the ones left out are off."""
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object with Faults fields")
    known = {"latency", "error_rate", "drop_rate", "malformed_rate", "rate_limited_rate", "retry_after", "operations"}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"unknown fault fields: {', '.join(sorted(unknown))}")
    operations = data.get("operations")
    if operations is not None and not (isinstance(operations, list) and all(isinstance(o, str) for o in operations)):
        raise ValueError("operations must be a list of operation names or null")
    numbers: dict[str, Any] = {"retry_after": None}  # the one field that may be null: no header
    for name in known - {"operations"}:
        value = data.get(name, numbers.get(name, 0.0))
        if value is None and name == "retry_after":
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{name} must be a number")
        numbers[name] = float(value)
    return Faults(**numbers, operations=frozenset(operations) if operations is not None else None)


def faults_to_json(faults: Faults) -> dict[str, object]:
    return {"latency": faults.latency, "error_rate": faults.error_rate, "drop_rate": faults.drop_rate,
            "malformed_rate": faults.malformed_rate, "rate_limited_rate": faults.rate_limited_rate,
            "retry_after": faults.retry_after,
            "operations": sorted(faults.operations) if faults.operations is not None else None}
