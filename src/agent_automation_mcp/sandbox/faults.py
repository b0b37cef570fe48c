"""Which fault, if any, hits a request; the dice come from the sandbox's seeded random generator."""

from __future__ import annotations

import random
from typing import Any, Literal

from .config import FAULT_RATES, Faults

Fault = Literal["error", "throttle", "redirect", "drop", "malformed", "empty"]
_FAULTS: dict[str, Fault] = {"error_rate": "error", "throttle_rate": "throttle", "redirect_rate": "redirect",
                             "drop_rate": "drop", "malformed_rate": "malformed", "empty_rate": "empty"}


def choose_fault(faults: Faults, operation: str, rng: random.Random) -> Fault | None:
    """One roll decides among the faults, in the order of `FAULT_RATES`."""
    if not faults.applies_to(operation) or not any(getattr(faults, name) for name in FAULT_RATES):
        return None
    roll = rng.random()
    bound = 0.0
    for name in FAULT_RATES:
        bound += getattr(faults, name)
        if roll < bound:
            return _FAULTS[name]
    return None


def malformed(body: bytes) -> bytes:
    """A truncated JSON text (never valid JSON: an object or array cut before its closing bracket)."""
    return body[: max(1, len(body) // 2)] if len(body) > 1 else b"{"


def faults_from_json(data: object) -> Faults:
    """The `PUT /_sandbox/faults` body: any of the `Faults` fields; the ones left out are off."""
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object with Faults fields")
    known = {"latency", *FAULT_RATES, "throttle_retry_after", "operations"}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"unknown fault fields: {', '.join(sorted(unknown))}")
    operations = data.get("operations")
    if operations is not None and not (isinstance(operations, list) and all(isinstance(o, str) for o in operations)):
        raise ValueError("operations must be a list of operation names or null")
    numbers: dict[str, Any] = {}
    for name in known - {"operations"}:
        value = data.get(name, 0.0)
        if value is None and name == "throttle_retry_after":  # the one field that may be null: no header
            numbers[name] = None
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{name} must be a number")
        numbers[name] = float(value)
    return Faults(**numbers, operations=frozenset(operations) if operations is not None else None)


def faults_to_json(faults: Faults) -> dict[str, object]:
    return {"latency": faults.latency, **{name: getattr(faults, name) for name in FAULT_RATES},
            "throttle_retry_after": faults.throttle_retry_after,
            "operations": sorted(faults.operations) if faults.operations is not None else None}
