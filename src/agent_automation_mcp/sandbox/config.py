"""What a sandbox is configured with: who may call it, its limits, its clock and its fault switches."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..api.limits import RateLimit, parse_rate_limits

Algorithm = Literal["fixed", "sliding-log", "sliding-counter"]
LogsPaths = Literal["both", "alpha", "contract"]
ALGORITHMS: tuple[Algorithm, ...] = ("fixed", "sliding-log", "sliding-counter")
LOGS_PATHS: tuple[LogsPaths, ...] = ("both", "alpha", "contract")
DEMO_TOKEN = "sandbox-demo-token"
# Each rate is a share of requests; one roll picks at most one of them, in this order of precedence.
FAULT_RATES = ("error_rate", "throttle_rate", "redirect_rate", "drop_rate", "malformed_rate", "empty_rate")
MAX_VISIBLE_ORGS = 8  # entity ids are laid out in blocks of 1000 per organisation, below the ids of new things
MAX_RECENT_RUNS = 5000


@dataclass
class Faults:
    """Failure switches for reliability work; all off by default and mutable while the sandbox runs.

    A fault hits a request after authentication and rate limiting. `error_rate` answers 500, `throttle_rate`
    429 (with `Retry-After: throttle_retry_after`, or none when that is None) and `redirect_rate` a 307 to
    another address, all without handling the request; `drop_rate`, `malformed_rate` and `empty_rate` handle it
    and then lose the answer (the connection is closed without a response, a 200 carries a truncated body, or a
    202 carries none), which is the case a client must not retry blindly.
    """

    latency: float = 0.0
    error_rate: float = 0.0
    drop_rate: float = 0.0
    malformed_rate: float = 0.0
    throttle_rate: float = 0.0
    redirect_rate: float = 0.0
    empty_rate: float = 0.0
    throttle_retry_after: float | None = 0.0  # the Retry-After of `throttle_rate`'s 429s, in seconds; None: no header
    operations: frozenset[str] | None = None  # restrict the faults to these operation names; None = all

    def __post_init__(self) -> None:
        if self.latency < 0:
            raise ValueError(f"latency must be >= 0, got {self.latency}")
        for name in FAULT_RATES:
            rate = getattr(self, name)
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {rate}")
        if self.throttle_retry_after is not None and not self.throttle_retry_after >= 0:
            raise ValueError(f"throttle_retry_after must be >= 0 seconds or null, got {self.throttle_retry_after}")
        if self.operations is not None:
            self.operations = frozenset(self.operations)

    def applies_to(self, operation: str) -> bool:
        return self.operations is None or operation in self.operations

    @property
    def active(self) -> bool:
        return bool(self.latency or any(getattr(self, name) for name in FAULT_RATES))


@dataclass
class SandboxConfig:
    tokens: tuple[str, ...] = (DEMO_TOKEN,)
    org_id: int = 1
    rate_limits: dict[str, RateLimit] = field(default_factory=lambda: parse_rate_limits(None))
    algorithm: Algorithm = "sliding-log"
    retry_after: bool = True
    run_seconds: float = 20.0  # from create or resume to the terminal status
    seed: int = 0
    logs_paths: LogsPaths = "both"
    visible_orgs: int = 1  # org ids org_id .. org_id+visible_orgs-1; org_id+visible_orgs exists but is forbidden
    # The visible organisations each named token's user belongs to; a token not named belongs to all of them.
    token_orgs: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # One person's several API tokens: a token named here belongs to the user of the (earlier) token it maps to,
    # and sees that user's organisations.
    token_owners: dict[str, str] = field(default_factory=dict)
    faults: Faults = field(default_factory=Faults)
    max_runs: int = 100_000  # agent runs an organisation may create before 402 (plan quota)
    run_error_fraction: float = 0.15  # share of new runs that end in ERROR instead of COMPLETE
    large_run_log_entries: int = 250  # trace size of the seeded run with a long trace
    # Runs the demo organisation started over the day before the sandbox did (`seed.RECENT_HOURS`), after the
    # seeded ones: a day's work for a list's time bound and counts (ids from FIRST_NEW_RUN_ID).
    recent_runs: int = 0
    # The real service's deviations from its own OpenAPI (string integration ids, string tool_output).
    # Off by default so that every response validates against the reference schemas.
    quirks: bool = False

    def __post_init__(self) -> None:
        if not self.tokens or any(not token for token in self.tokens):
            raise ValueError("the sandbox needs at least one non-empty token")
        if len(set(self.tokens)) != len(self.tokens):
            raise ValueError("sandbox tokens must be distinct")
        if self.org_id < 1:
            raise ValueError(f"org_id must be >= 1, got {self.org_id}")
        if not 1 <= self.visible_orgs <= MAX_VISIBLE_ORGS:
            raise ValueError(f"visible_orgs must be between 1 and {MAX_VISIBLE_ORGS}, got {self.visible_orgs}")
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}")
        if self.logs_paths not in LOGS_PATHS:
            raise ValueError(f"logs_paths must be one of {', '.join(LOGS_PATHS)}, got {self.logs_paths!r}")
        if self.run_seconds < 0:
            raise ValueError(f"run_seconds must be >= 0, got {self.run_seconds}")
        if not 0 <= self.recent_runs <= MAX_RECENT_RUNS:
            raise ValueError(f"recent_runs must be between 0 and {MAX_RECENT_RUNS}, got {self.recent_runs}")
        if not 0.0 <= self.run_error_fraction <= 1.0:
            raise ValueError(f"run_error_fraction must be between 0 and 1, got {self.run_error_fraction}")
        self.tokens = tuple(self.tokens)
        for token, orgs in self.token_orgs.items():
            if token not in self.tokens:
                raise ValueError("token_orgs names a token the sandbox does not accept")  # never echo a token
            if not orgs or not set(orgs) <= set(self.visible_org_ids):
                raise ValueError(f"a token's organisations must be visible ones ({self.visible_org_ids}), got {orgs}")
        self.token_orgs = {token: tuple(orgs) for token, orgs in self.token_orgs.items()}
        for token, owner in self.token_owners.items():  # never echo a token
            if token not in self.tokens or owner not in self.tokens[:self.tokens.index(token)]:
                raise ValueError("token_owners maps a token to one listed before it (both accepted by the sandbox)")
            if owner in self.token_owners or token in self.token_orgs:
                raise ValueError("a token in token_owners has its owner's user: it owns none and has no token_orgs")
        self.rate_limits = {**parse_rate_limits(None), **self.rate_limits}

    @property
    def token(self) -> str:
        """The demo token: the first one."""
        return self.tokens[0]

    @property
    def visible_org_ids(self) -> tuple[int, ...]:
        return tuple(range(self.org_id, self.org_id + self.visible_orgs))

    def orgs_of(self, token: str) -> tuple[int, ...]:
        return self.token_orgs.get(self.token_owners.get(token, token), self.visible_org_ids)

    @property
    def forbidden_org_id(self) -> int:
        """An organisation that exists but that no token may access."""
        return self.org_id + self.visible_orgs
