"""Everything one sandbox app holds between requests, on `app.state.sandbox`."""

from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass, field
from typing import Any

from .config import Faults, SandboxConfig
from .ratelimit import RateLimiter
from .seed import build_world
from .world import World


def token_hash(token: str | None) -> str | None:
    """How the request log names a token: never the token itself."""
    return hashlib.sha256(token.encode()).hexdigest()[:16] if token else None


@dataclass(frozen=True, slots=True)
class RequestRecord:
    time: float  # wall clock, seconds since the epoch
    method: str
    path: str
    query: str
    operation: str | None  # None for unknown routes
    status: int | None  # None when the connection was dropped
    token_hash: str | None
    fault: str | None = None
    traceparent: str | None = None  # the W3C trace context the request came with: where a trace would go on

    def to_json(self) -> dict[str, Any]:
        return {"time": self.time, "method": self.method, "path": self.path, "query": self.query,
                "operation": self.operation, "status": self.status, "token_hash": self.token_hash,
                "fault": self.fault, "traceparent": self.traceparent}


@dataclass
class SandboxState:
    config: SandboxConfig
    world: World
    limiter: RateLimiter
    faults: Faults
    fault_rng: random.Random
    request_log: list[RequestRecord] = field(default_factory=list)
    webhook_tests: list[dict[str, Any]] = field(default_factory=list)  # recorded, never sent

    @classmethod
    def from_config(cls, config: SandboxConfig) -> SandboxState:
        return cls(config=config, world=build_world(config),
                   limiter=RateLimiter(config.rate_limits, config.algorithm, config.seed),
                   faults=config.faults, fault_rng=random.Random(f"{config.seed}:faults"))

    def tick(self) -> float:
        """Catch every run up with the clock; return the monotonic time used."""
        now = time.monotonic()
        self.world.advance(now)
        return now

    def requests_for(self, operation: str) -> list[RequestRecord]:
        return [record for record in self.request_log if record.operation == operation]
