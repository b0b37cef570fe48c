"""`GET /metrics` in the Prometheus text format: what one replica did, never who it did it for.

Labels are tool names, task methods, outcomes (`ok` or an error kind), rate-limit buckets, HTTP statuses, refusal
reasons and token verdicts only: no token, tenant or organisation. Each server has its own registry, so several in
one process stay apart. Beside `FAMILIES`, the process's own (`process_resident_memory_bytes`, CPU seconds, open
files: prometheus-client's `ProcessCollector`, on Linux), read against `agent_automation_memory_limit_bytes`.

The label values the alerts read are exported at 0 from the start: a series born at its first increment shows in
`rate()` only from its second scrape, so a flood that came and went within one scrape interval (2,243 refused
registrations once) would never show at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Generic, TypeVar, cast, overload

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics import MetricWrapperBase

from .memory import memory_limit

CONTENT_TYPE: Final = CONTENT_TYPE_LATEST
PACING_BUCKETS: Final = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 45.0)
# Up to a call's whole budget: most calls take well under a second, `wait_seconds` and paging up to ~55 s.
CALL_BUCKETS: Final = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0)
VERDICTS: Final = {True: "accepted", False: "refused", None: "undecided"}
LISTEN_REFUSALS: Final = ("tenant", "replica")  # why a listen stream was refused: its tenant's cap, the replica's


REDIS_STATES = ("reachable", "unreachable", "never reached", "not configured")  # `redis` in /readyz
# Tool call outcomes that are the service's or this server's failures (AgentAutomationToolErrors reads these).
SERVICE_SIDE_FAILURES: Final = ("server_error", "timeout", "connection", "outcome_unknown", "unexpected_status",
                                "bad_response", "internal_error")
# The service's answers the alerts read (429s, failures), and the successes they are a share of.
UPSTREAM_STATUSES: Final = ("200", "429", "500", "502", "503", "504", "timeout", "connection")
# Why /mcp requests are refused, with the status each gets.
REFUSALS: Final = (("400", "bad_request"), ("400", "overlong"), ("401", "no_token"), ("401", "token_refused"),
                   ("403", "origin"), ("403", "org_not_allowed"), ("403", "insufficient_scope"),
                   ("405", "method_not_allowed"), ("406", "not_acceptable"), ("408", "body_too_slow"),
                   ("413", "body_too_large"), ("421", "host"),
                   ("429", "rate_limited"), ("429", "requests_per_token"), ("502", "undecided"),
                   ("503", "unavailable"), ("503", "bodies_held"))
# Sign-in endpoints that spend an address's budget, and what they answer when it is spent or its store is down.
BUDGETED_SIGNIN: Final = ("authorize", "consent", "token", "register", "revoke")
BUDGET_REFUSALS: Final = (("429", "rate_limited"), ("503", "unavailable"))


M = TypeVar("M", bound=MetricWrapperBase)


@dataclass(frozen=True, slots=True)
class Family(Generic[M]):
    """A metric family as /metrics names it, declared as an attribute of `Metrics`; `zeros`: the label values
    exported at 0 from the start."""

    kind: type[M]
    name: str
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] | None = None  # a histogram's
    zeros: tuple[tuple[str, ...], ...] = ()

    def build(self, registry: CollectorRegistry) -> M:
        kind = self.kind
        if self.buckets is not None and issubclass(kind, Histogram):
            return kind(self.name, self.help, self.labels, registry=registry, buckets=self.buckets)
        return kind(self.name, self.help, self.labels, registry=registry)

    if TYPE_CHECKING:  # `Metrics` builds each family into its instance's attribute of the same name
        @overload
        def __get__(self, metrics: None, owner: type[Metrics]) -> Family[M]: ...

        @overload
        def __get__(self, metrics: Metrics, owner: type[Metrics]) -> M: ...

        def __get__(self, metrics: Metrics | None, owner: type[Metrics]) -> Family[M] | M: ...


class Metrics:
    """Implements the server's `CallObserver` (and so the transport's `TransportObserver`). Each family below is
    the attribute of its name (`metrics.tool_calls`, a `Counter`); adding one is a line here and a method that counts
    it."""

    tool_calls = Family(Counter, "agent_automation_tool_calls", "Tool calls by tool and outcome (ok or error kind).",
                        ("tool", "outcome"))
    calls_in_flight = Family(Gauge, "agent_automation_tool_calls_in_flight", "Tool calls running now.")
    task_requests = Family(
        Counter, "agent_automation_task_requests", "Task requests (tasks/get, tasks/result, tasks/list, tasks/cancel) "
        "by method and outcome (ok, rate_limited, invalid_params, still_working...).", ("method", "outcome"))
    task_requests_in_flight = Family(Gauge, "agent_automation_task_requests_in_flight",
                                     "Task requests being answered now (tasks/result waits up to 35 s).")
    task_request_duration = Family(Histogram, "agent_automation_task_request_duration_seconds",
                                   "How long task requests took, by method.", ("method",), CALL_BUCKETS)
    upstream_requests = Family(
        Counter, "agent_automation_upstream_requests", "Requests sent to the service, once per rate-limit bucket they "
        "count against, by HTTP status (or timeout, connection).", ("bucket", "status"))
    pacing_wait = Family(Histogram, "agent_automation_pacing_wait_seconds",
                         "How long requests waited for their turn under the rate limits.", buckets=PACING_BUCKETS)
    call_duration = Family(Histogram, "agent_automation_tool_call_duration_seconds",
                           "How long tool calls took, by tool.", ("tool",), CALL_BUCKETS)
    responses = Family(Counter, "agent_automation_http_responses", "Answers to /mcp requests by HTTP status.",
                       ("status",), zeros=tuple((status,) for status in dict.fromkeys(
                           (*(status for status, _ in REFUSALS), "200", "202", "500"))))
    refused = Family(
        Counter, "agent_automation_http_refused", "/mcp requests refused before or by the MCP SDK, by HTTP status and "
        f"reason ({', '.join(dict.fromkeys(reason for _, reason in REFUSALS))}, other).", ("status", "reason"),
        zeros=REFUSALS)
    token_checks = Family(
        Counter, "agent_automation_token_checks", "Questions to the service whether a token is valid, by verdict "
        "(accepted, refused, or undecided: the service could not answer and the request went on).", ("verdict",),
        zeros=tuple((verdict,) for verdict in VERDICTS.values()))
    verdicts_recalled = Family(
        Counter, "agent_automation_token_verdicts_recalled", "Requests served on their token's earlier verdict (from "
        "the last day) because the service could not answer its check.")
    listen_streams = Family(Gauge, "agent_automation_listen_streams",
                            "Task listen streams (subscriptions/listen) open now on this replica.")
    listen_streams_limit = Family(Gauge, "agent_automation_listen_streams_limit",
                                  "The most task listen streams one replica holds at once.")
    listen_refused = Family(
        Counter, "agent_automation_listen_refused", "Task listen streams refused, by reason: tenant (its tenant, a "
        "Codegen user, holds its share of this replica's streams) or replica (every stream of this replica is "
        "taken).", ("reason",), zeros=tuple((reason,) for reason in LISTEN_REFUSALS))
    oauth_requests = Family(
        Counter, "agent_automation_oauth_requests", "Requests to the sign-in endpoints (authorize, consent, token, "
        "register, revoke, metadata), by HTTP status and reason (ok, or why it was refused: rate_limited, "
        "invalid_grant, invalid_client, expired, too_large...).", ("endpoint", "status", "reason"))
    open_connections = Family(Gauge, "agent_automation_open_connections",
                              "HTTP requests being served now on this replica, streams included.")
    open_streams = Family(Gauge, "agent_automation_open_streams", "Responses streaming (SSE) now on this replica.")
    redis_up = Family(Gauge, "agent_automation_redis_up",
                      "1 while the shared pacing store answers, 0 when it does not or none is configured.")
    memory_limit = Family(Gauge, "agent_automation_memory_limit_bytes", "The memory this replica may use: the "
                          "tightest limit of its cgroups (a container's), else the machine's; "
                          "process_resident_memory_bytes is what it uses.")
    redis_state = Family(Gauge, "agent_automation_redis_state", "1 for the shared pacing store's state now: "
                         "reachable, unreachable, never reached (since start: a wrong URL?) or not configured.",
                         ("state",))
    redis_data_lost = Family(
        Counter, "agent_automation_redis_data_lost", "Times this replica found that Redis had lost its data since it "
        "last looked (its data's marker gone: restarted empty, failed over to an empty copy, flushed).")
    clock_offset = Family(Gauge, "agent_automation_clock_offset_seconds",
                          "This replica's clock less Redis' (TIME), at its last look; 0 without Redis.")

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)  # process_resident_memory_bytes and the rest, read at each scrape
        # Each labelled series, found once: `labels()` cost several times the count it finds, several times a call.
        # As many as the labels' values: tools, outcomes, buckets, statuses, reasons (a bounded set, as exported).
        self._series: dict[tuple[MetricWrapperBase, tuple[str, ...]], MetricWrapperBase] = {}
        for attribute, family in FAMILIES.items():
            metric = family.build(self.registry)
            setattr(self, attribute, metric)
            for values in family.zeros:
                self._labelled(metric, *values)

    def _labelled(self, metric: M, *values: str) -> M:
        """`metric.labels(*values)`, values in the order the metric declares its labels."""
        series = self._series.get((metric, values))
        if series is None:
            series = self._series[metric, values] = metric.labels(*values)
        return cast(M, series)  # `labels` answers its metric's own type; the cache holds every kind

    def expect(self, tools: Iterable[str], buckets: Iterable[str], *, sign_in: bool) -> None:
        """Export at 0 what this server can count: its tools' calls (ok, or failing on the service's side), its
        buckets' upstream answers, and, with sign-in, its budget refusals."""
        for tool in tools:
            self._labelled(self.call_duration, tool)
            for outcome in ("ok", *SERVICE_SIDE_FAILURES):
                self._labelled(self.tool_calls, tool, outcome)
        for bucket in buckets:
            for status in UPSTREAM_STATUSES:
                self._labelled(self.upstream_requests, bucket, status)
        for endpoint in BUDGETED_SIGNIN if sign_in else ():
            for status, reason in BUDGET_REFUSALS:
                self._labelled(self.oauth_requests, endpoint, status, reason)

    def call_started(self, tool: str) -> None:
        self.calls_in_flight.inc()

    def call_finished(self, tool: str, outcome: str, seconds: float) -> None:
        self.calls_in_flight.dec()
        self._labelled(self.tool_calls, tool, outcome).inc()
        self._labelled(self.call_duration, tool).observe(seconds)

    def call_paused(self, tool: str, seconds: float) -> None:
        self.calls_in_flight.dec()  # not a finished call: the answer comes back as one

    def request_started(self, method: str) -> None:
        self.task_requests_in_flight.inc()

    def request_finished(self, method: str, outcome: str, seconds: float) -> None:
        self.task_requests_in_flight.dec()
        self._labelled(self.task_requests, method, outcome).inc()
        self._labelled(self.task_request_duration, method).observe(seconds)

    def paced(self, seconds: float) -> None:
        self.pacing_wait.observe(seconds)

    def upstream(self, buckets: Sequence[str], status: str) -> None:
        for bucket in buckets:
            self._labelled(self.upstream_requests, bucket, status).inc()

    def responded(self, status: int, reason: str | None) -> None:
        """A `/mcp` request was answered with `status`; `reason` says why when it was refused."""
        self._labelled(self.responses, str(status)).inc()
        if reason is not None:
            self._labelled(self.refused, str(status), reason).inc()

    def signin_answered(self, endpoint: str, status: int, reason: str) -> None:
        """A sign-in endpoint answered `status`; `reason` is `ok` or why it refused."""
        self._labelled(self.oauth_requests, endpoint, str(status), reason).inc()

    def token_checked(self, verdict: bool | None) -> None:
        """The service was asked about a token: accepted (True), refused (False) or no answer (None)."""
        self._labelled(self.token_checks, VERDICTS[verdict]).inc()

    def verdict_recalled(self) -> None:
        self.verdicts_recalled.inc()

    def redis_lost_data(self) -> None:
        self.redis_data_lost.inc()

    def listen_held(self, streams: int, limit: int) -> None:
        """`streams` task listen streams are open now, of at most `limit`."""
        self.listen_streams.set(streams)
        self.listen_streams_limit.set(limit)

    def listen_refused_for(self, reason: str) -> None:
        """A task listen stream was refused: one of `LISTEN_REFUSALS`."""
        self._labelled(self.listen_refused, reason).inc()

    def exposition(self, redis_state: str) -> bytes:
        """The metrics now; `redis_state` is one of `REDIS_STATES`, as `/readyz` says it."""
        self.redis_up.set(1 if redis_state == "reachable" else 0)
        limit = memory_limit()  # read at each scrape: a pod's limit may be resized in place
        if limit is not None:
            self.memory_limit.set(limit)
        for state in REDIS_STATES:
            self._labelled(self.redis_state, state).set(1 if state == redis_state else 0)
        return generate_latest(self.registry)


# Every family a replica exports, by the `Metrics` attribute that holds it.
FAMILIES: Final = {attribute: family for attribute, family in vars(Metrics).items() if isinstance(family, Family)}
