"""Pacing benchmark: the real path (client -> pacer -> HTTP) against the sandbox in each enforcement mode.

    .venv/bin/python benchmarks/pacing.py [--duration 30] [--algorithms fixed,...] [--write docs/benchmarks.md]

Every window is scaled down tenfold on both sides (standard 60/3 s, logs 60/6 s, ...), with a 0.1 s margin.
For each server algorithm, 20 callers on one token call through 1 replica (memory or Redis) or 3 replica
processes sharing a private redis-server; then come the product's default margin (0.25 s) against a sliding log,
and a sliding-window counter as the service is (no Retry-After, answers slower than the spacing after a 429);
then a 10,000-entry trace is read page by page and in parallel. Loopback only, bounded in time (about 12 times
--duration on 2 cores), and everything it starts it stops.

    .venv/bin/python benchmarks/pacing.py --outage [--duration 60] [--outage-seconds 30,5] [--outage-data empty,kept]
                                         [--write docs/benchmarks.md]

runs only the Redis outage instead: 3 replicas under the same load, the redis-server killed (SIGKILL) a quarter of
the way in and started again (empty) `--outage-seconds` later, or paused that long (`kept`: it comes back with its
data), once per value given.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import math
import multiprocessing
import os
import shutil
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from redis import Redis

from agent_automation_mcp.api import AgentAutomationClient, ApiTransport, Credentials
from agent_automation_mcp.api.errors import ApiError, RateLimitError
from agent_automation_mcp.api.limits import DEFAULT_RATE_LIMITS, STANDARD, RateLimit, format_rate_limits
from agent_automation_mcp.api.pacer import Pacer, Receipt
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.pacing import create_pacer, redis_ledger, sliding_log
from agent_automation_mcp.sandbox import Faults, SandboxConfig, SandboxServer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.pacing.redis_server
sys.path.append(str(ROOT / "tests"))  # the helpers it imports (ports), after this folder's modules, as fleet.py
from report import command_line, publish  # noqa: E402  (benchmarks/, the script's own folder)
from stats import percentile  # noqa: E402
from tests.pacing.redis_server import RedisServer  # noqa: E402  (one launcher for the tests and this benchmark)

SCALE = 0.1
MARGIN = 0.1  # must cover how long the sandbox takes to timestamp a burst of 60 on 2 cores (25 ms did not)
CALLERS = 20
CALL_BUDGET = 20.0  # seconds per call, as a tool would give it
LOGS_SHARE = 0.1  # of the calls read one log page (logs + standard); the rest read a run (standard)
TRACE_ENTRIES = 10_000
PAGE = 100
LIMITS = {name: RateLimit(limit.count, limit.window * SCALE) for name, limit in DEFAULT_RATE_LIMITS.items()}
ALGORITHMS = ("fixed", "sliding-log", "sliding-counter")


@dataclass(frozen=True)
class Server:
    """The sandbox a load runs against, and the margin its replicas pace with."""

    algorithm: str
    retry_after: bool = True
    latency: float = 0.0  # seconds the sandbox adds to every answer
    margin: float = MARGIN

    @property
    def label(self) -> str:
        return ", ".join([self.algorithm, *(["no Retry-After"] if not self.retry_after else []),
                          *([f"{self.latency:g} s latency"] if self.latency else []),
                          *([f"margin {self.margin:g} s"] if self.margin != MARGIN else [])])


# After the plain rows: the product's default margin, where a short window lost the most; and the service as it
# is against a counter: no Retry-After, and answers slower than the spacing after a 429 (W/(N-1) = 51 ms here).
COUNTER_AS_THE_SERVICE = Server("sliding-counter", retry_after=False, latency=0.1)
EXTRA_ROWS = ((Server("sliding-log", margin=ApiSettings().rate_margin), 1, False),
              (COUNTER_AS_THE_SERVICE, 1, False), (COUNTER_AS_THE_SERVICE, 3, True))


@dataclass
class ReplicaJob:
    base_url: str
    token: str
    org_id: int
    run_id: int
    redis_url: str | None
    callers: int
    start_at: float  # time.time(): replicas in separate processes start together
    duration: float
    first_caller: int
    max_replicas: int = 4
    margin: float = MARGIN


@dataclass
class ReplicaResult:
    waits: list[float] = field(default_factory=list)  # added wait per call: pacer + 429 pauses
    budget_errors: int = 0  # RateLimitError raised to the caller
    other_errors: list[str] = field(default_factory=list)
    shared_again: list[float] = field(default_factory=list)  # time.time() when the replica paced on Redis alone again


class TimedPacer:
    """Adds up, per task, the time a call spent waiting for the pacer and after 429s."""

    def __init__(self, inner: Pacer) -> None:
        self.inner = inner
        self._waits: dict[int, float] = {}

    def take(self) -> float:
        return self._waits.pop(anyio.get_current_task().id, 0.0)

    def _add(self, seconds: float) -> None:
        task = anyio.get_current_task().id
        self._waits[task] = self._waits.get(task, 0.0) + seconds

    async def acquire(self, token_key: str, buckets: Any, deadline: float | None, *,
                      bulk: bool = False) -> Receipt:
        started = time.monotonic()
        try:
            return await self.inner.acquire(token_key, buckets, deadline, bulk=bulk)
        finally:
            self._add(time.monotonic() - started)

    async def settled(self, receipt: Receipt, status: int | None) -> None:
        await self.inner.settled(receipt, status)

    async def rate_limited(self, token_key: str, buckets: Any, retry_after: float | None) -> float:
        wait = await self.inner.rate_limited(token_key, buckets, retry_after)
        self._add(wait)  # the transport sleeps this long before sending again
        return wait

    async def aclose(self) -> None:
        await self.inner.aclose()


def settings_for(base_url: str, redis_url: str | None, max_replicas: int = 4, margin: float = MARGIN) -> ApiSettings:
    return ApiSettings(base_url=base_url, rate_limits=dict(LIMITS), redis_url=redis_url, rate_margin=margin,
                       max_replicas=max_replicas)


class SharedAgain(logging.Handler):
    """Notes when the replica's ledger logs that pacing is shared through Redis again."""

    def __init__(self, result: ReplicaResult) -> None:
        super().__init__(logging.WARNING)
        self.result = result

    def emit(self, record: logging.LogRecord) -> None:
        if "through Redis again" in record.getMessage():
            self.result.shared_again.append(record.created)


async def run_replica(job: ReplicaJob) -> ReplicaResult:
    settings = settings_for(job.base_url, job.redis_url, job.max_replicas, job.margin)
    pacer = TimedPacer(create_pacer(settings))
    result = ReplicaResult()
    logging.getLogger(redis_ledger.__name__).addHandler(SharedAgain(result))
    async with ApiTransport(settings, pacer) as transport:
        client = AgentAutomationClient(transport, Credentials(job.token, job.org_id))
        async def caller(number: int) -> None:
            calls = 0
            while True:
                calls += 1
                try:
                    within = client.within(CALL_BUDGET)
                    if (number * 7 + calls) % round(1 / LOGS_SHARE) == 0:
                        await within.get_agent_run_logs(job.run_id, skip=0, limit=10)
                    else:
                        await within.get_agent_run(job.run_id)
                except RateLimitError:
                    result.budget_errors += 1
                except ApiError as exc:
                    result.other_errors.append(repr(exc))
                result.waits.append(pacer.take())

        await anyio.sleep(max(0.0, job.start_at - time.time()))
        # At the end, calls still waiting are cancelled (and so never charged): the load stops at once.
        with anyio.move_on_after(job.duration):
            async with anyio.create_task_group() as tg:
                for number in range(job.callers):
                    tg.start_soon(caller, job.first_caller + number)
    return result


def replica_process(job: ReplicaJob, results: Any) -> None:
    results.put(asdict(asyncio.run(run_replica(job))))


@dataclass
class LoadRow:
    server: str
    replicas: str
    requests: int
    rejected: int
    rejected_late: int  # 429s after the first third of the run: "then none"
    utilisation: float  # of what an exact sliding-log server admits
    of_server: float  # of what this server's own algorithm admits at the most
    wait_p50: float
    wait_p99: float
    budget_errors: int
    other_errors: int


def utilisation(times: list[float], limit: RateLimit, algorithm: str = "sliding-log") -> float:
    """Admitted in the whole windows from the first admitted request / the most the server admits in them.

    Whole windows only: a ragged end would count a window the callers had no time to use. In K windows an
    exact sliding log (and, over whole windows, a fixed window) admits N * K. A sliding-window counter admits N
    in its first window and then N-1 a window in the long run, since the last window's sends still weigh on
    the estimate.
    """
    if not times:
        return 0.0
    first = min(times)
    windows = max(1, int((max(times) - first) / limit.window))
    admitted = sum(1 for t in times if t < first + windows * limit.window)
    most = limit.count * windows - (algorithm == "sliding-counter") * (windows - 1)
    return admitted / most


def create_run(base_url: str, entries: int) -> int:
    response = httpx2.post(f"{base_url}/_sandbox/runs", json={"log_entries": entries, "status": "COMPLETE"})
    response.raise_for_status()
    return int(response.json()["id"])


@dataclass
class Outage:
    """The redis-server is killed `at` seconds into the load and started again, empty, `seconds` later; or, if it
    `keeps_data`, it is paused that long (every replica times out on it) and then answers as it was."""

    at: float
    seconds: float
    keeps_data: bool = False


def run_load(server: Server, replicas: int, redis: RedisServer | None, duration: float,
             outage: Outage | None = None) -> tuple[list[Any], list[ReplicaResult], float]:
    """The sandbox's log of API requests, each replica's results, and when the load started (time.time())."""
    config = SandboxConfig(rate_limits=dict(LIMITS), algorithm=server.algorithm, retry_after=server.retry_after,
                           seed=11, faults=Faults(latency=server.latency))
    with SandboxServer(config) as sandbox:
        run_id = create_run(sandbox.url, 20)
        if redis is not None:
            redis.flush()
        start_at = time.time() + 3.0
        shares = [CALLERS // replicas + (1 if i < CALLERS % replicas else 0) for i in range(replicas)]
        context = multiprocessing.get_context("spawn")
        results = context.Queue()
        processes = []
        for i, callers in enumerate(shares):
            job = ReplicaJob(sandbox.url, sandbox.token, sandbox.org_id, run_id,
                             redis.url if redis is not None else None, callers, start_at, duration, sum(shares[:i]),
                             max_replicas=replicas if outage is not None else 4, margin=server.margin)
            process = context.Process(target=replica_process, args=(job, results), daemon=True)
            process.start()
            processes.append(process)
        if outage is not None and redis is not None:
            time.sleep(max(0.0, start_at + outage.at - time.time()))
            if outage.keeps_data:
                with Redis.from_url(redis.url) as control:
                    control.execute_command("CLIENT", "PAUSE", round(outage.seconds * 1000), "ALL")
                time.sleep(outage.seconds)
            else:
                redis.kill()  # as an operator's kill -9, or the out-of-memory killer
                time.sleep(outage.seconds)
                redis.start()
        outcomes = [ReplicaResult(**results.get(timeout=duration + CALL_BUDGET + 30)) for _ in processes]
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
        log = [r for r in sandbox.request_log if r.operation is not None]
    return log, outcomes, start_at


def load_scenario(server: Server, replicas: int, redis: RedisServer | None, duration: float) -> LoadRow:
    log, outcomes, start_at = run_load(server, replicas, redis, duration)
    admitted = [r.time for r in log if r.status != 429]
    rejected = [r.time for r in log if r.status == 429]
    waits = [w for outcome in outcomes for w in outcome.waits]
    label = f"{replicas} ({'Redis' if redis is not None else 'memory'})"
    return LoadRow(server.label, label, len(log), len(rejected),
                   sum(1 for t in rejected if t > start_at + duration / 3), utilisation(admitted, LIMITS[STANDARD]),
                   utilisation(admitted, LIMITS[STANDARD], server.algorithm),
                   percentile(waits, 50), percentile(waits, 99), sum(o.budget_errors for o in outcomes),
                   sum(len(o.other_errors) for o in outcomes))


@dataclass
class OutageRow:
    outage: float  # seconds Redis was down
    keeps_data: bool  # paused, not restarted empty
    replicas: int
    requests: int
    rejected: tuple[int, int, int]  # 429s before the outage, during it, after Redis is back
    admitted_during: float  # of the most an exact sliding log admits to the standard bucket over the outage
    failed: int  # calls that raised: a rate_limited answer or any other error
    back_after: float | None  # seconds from Redis' return until the last replica that fell back paced on Redis alone
    wait_p50: float
    wait_p99: float
    errors: list[str]


def outage_scenario(redis: RedisServer, duration: float, outage: Outage, replicas: int = 3) -> OutageRow:
    log, outcomes, start_at = run_load(Server("sliding-log"), replicas, redis, duration, outage)
    down, up = start_at + outage.at, start_at + outage.at + outage.seconds
    rejected = [r.time for r in log if r.status == 429]
    during = [r.time for r in log if r.status != 429 and down <= r.time < up]
    standard = LIMITS[STANDARD]
    waits = [w for outcome in outcomes for w in outcome.waits]
    back = [max(t for t in o.shared_again if t >= up) for o in outcomes if any(t >= up for t in o.shared_again)]
    return OutageRow(outage.seconds, outage.keeps_data, replicas, len(log), (sum(1 for t in rejected if t < down),
                                          sum(1 for t in rejected if down <= t < up),
                                          sum(1 for t in rejected if t >= up)),
                     len(during) / (standard.count * math.ceil(outage.seconds / standard.window)),
                     sum(o.budget_errors + len(o.other_errors) for o in outcomes),
                     max(back) - up if back else None, percentile(waits, 50), percentile(waits, 99),
                     sorted({e for o in outcomes for e in o.other_errors}))


def render_outage(rows: list[OutageRow], duration: float, command: str, loads: tuple[float, float]) -> str:
    lines = [
        "## Pacing through a Redis outage", "",
        f"Produced by `{command}` on loopback ({os.cpu_count()} cores shared with other work, 1-minute load average "
        f"{loads[0]:.1f} at the start, {loads[1]:.1f} at the end). The load of the pacing section ({CALLERS} callers "
        "on one "
        f"token, a 20 s budget per call, windows scaled down tenfold: standard {LIMITS[STANDARD]}) for "
        f"{duration:g} s through replica processes sharing a redis-server, with `AGENT_AUTOMATION_MAX_REPLICAS` "
        f"equal to their number. {duration / 4:g} s in, the redis-server is killed (SIGKILL) and started again, "
        "empty, on the same port, after the outage given in the first column; or paused that long (`CLIENT PAUSE`: "
        "every replica times out on it), and then answers with its data.", "",
        "- **429**: answers the sandbox refused, before the outage / during it / after Redis is back.",
        "- **admitted during the outage**: requests the sandbox admitted while Redis was down, over the most an "
        "exact sliding log admits to the standard bucket in that span, N·⌈span/W⌉.",
        "- **failed calls**: calls that raised (rate_limited after their budget, or any other error).",
        "- **shared again after**: from Redis' return until the last replica paces on Redis alone again (its log "
        "line), no longer also at its share.", "",
        "| outage | Redis back | replicas | requests | 429 before / during / after | admitted during the outage | "
        "failed calls | shared again after | added wait p50 / p99 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        before, during, after = r.rejected
        back = "—" if r.back_after is None else f"{r.back_after:.1f} s"
        lines.append(f"| {r.outage:g} s | {'with its data' if r.keeps_data else 'empty'} | {r.replicas} | "
                     f"{r.requests} | {before} / {during} / {after} | {r.admitted_during:.3f} | {r.failed} | {back} | "
                     f"{r.wait_p50:.2f} s / {r.wait_p99:.2f} s |")
    lines += [
        "", "- While Redis is down, each replica counts every window as full when it lost Redis (the others may "
        "have used the limit just before, unseen), so it sends nothing for a window and the margin, then 1/R of "
        "every limit: with the load spread evenly they use the whole limit together, and no more.",
        "- When Redis is back, each replica carries into it what it sent meanwhile, and, if Redis came back empty "
        "(a new marker key), all it sent in the last two windows; then, unless Redis kept its data and came back "
        f"within the window, for {redis_ledger.REJOIN_TRIES} × {redis_ledger.RETRY_REDIS_AFTER:g} s (the time "
        "every replica takes to find Redis back, at a call or a readiness probe, and carry its own), it keeps to "
        "its share as well as to Redis.", "",
    ]
    return "\n".join(lines)


@dataclass
class TraceRow:
    mode: str
    seconds: float
    rejected: int
    rtt: float
    optimum: float


async def read_trace(base_url: str, token: str, org_id: int, run_id: int, parallel: bool) -> tuple[float, float]:
    """Seconds to read every page, and the median round trip of one page."""
    pacer = TimedPacer(create_pacer(settings_for(base_url, None)))
    round_trips: list[float] = []
    async with ApiTransport(settings_for(base_url, None), pacer) as transport:
        client = AgentAutomationClient(transport, Credentials(token, org_id)).as_bulk().within(120)

        async def page(skip: int) -> int:
            started = time.monotonic()
            logs = len((await client.get_agent_run_logs(run_id, skip=skip, limit=PAGE)).logs)
            round_trips.append(time.monotonic() - started - pacer.take())
            return logs

        started = time.monotonic()
        if parallel:
            first = await client.get_agent_run_logs(run_id, skip=0, limit=PAGE)
            pacer.take()
            async with anyio.create_task_group() as tg:
                for skip in range(PAGE, first.total_logs or 0, PAGE):
                    tg.start_soon(page, skip)
        else:  # the client's own pager, which stops at `total_logs`
            sent = time.monotonic()
            async for _ in client.iter_agent_run_logs(run_id, limit=PAGE):
                round_trips.append(time.monotonic() - sent - pacer.take())
                sent = time.monotonic()
        return time.monotonic() - started, statistics.median(round_trips)


def trace_scenario(parallel: bool) -> TraceRow:
    config = SandboxConfig(rate_limits=dict(LIMITS), algorithm="sliding-log", seed=11)
    with SandboxServer(config) as sandbox:
        run_id = create_run(sandbox.url, TRACE_ENTRIES)
        seconds, rtt = asyncio.run(read_trace(sandbox.url, sandbox.token, sandbox.org_id, run_id, parallel))
        rejected = sum(1 for r in sandbox.request_log if r.status == 429)
    logs = LIMITS["logs"]
    pages = TRACE_ENTRIES // PAGE
    # The best any safe client can do under an exact sliding log with an empty history, not knowing when the
    # service stamps a request but that it does so before answering: N pages at once, the rest one window after
    # their answers; page by page, the round trips of the second window add up.
    rounds = -(-pages // logs.count) - 1
    later = pages - rounds * logs.count
    optimum = rounds * (logs.window + rtt) + (rtt if parallel else later * rtt)
    return TraceRow("parallel pages" if parallel else "page by page", seconds, rejected, rtt, optimum)


# What short windows leave unused, and a counter's second 429: what closed them and what bounds the rest.
# Not measured by a row (the before figures are from the same rows run on the code before), so written here.
SHORT_WINDOWS = (
    "- **What a short window leaves unused.** The log holds, per send, the latest instant the service can have "
    "stamped it: its departure plus the margin m (the service's own queueing: stamping a burst of 60 took up to "
    "about 0.1 s on these 2 cores), lowered to the instant its answer came back, since the service stamps a "
    "request before it answers; a slot frees a window after that. Where the margin alone cost m/(W+m) of each "
    "window (3.2 % at 0.1 s on 3 s, 7.7 % at the default 0.25 s; the rows above read 0.969 to 0.972 before), an "
    "answered send now costs min(r, m)/(W+min(r, m)), r its round trip as the pacer sees it: a few milliseconds "
    "here, so the rows reach 1.000 at either margin. What bounds the rest: the service may stamp a request "
    "anywhere between its departure and its answer, so no client without the service's own stamp can count on "
    "less than the round trip; and the drift between the clock that logs (this process's, or Redis' for all "
    "replicas) and the service's over one window. A send that gets no answer (a timeout, a reset, a cancelled "
    "call) keeps departure + m, and a waiting replica sees another replica's answer only when it looks again, "
    "at the instant it was given before. Against the service's 30 s windows the margin cost 0.8 %; answers "
    "faster than the margin now cost less.",
    "- **A second 429 from a counter.** After a 429 the bucket pauses (Retry-After, or a backoff of at least "
    "1 s without one), then probes: its next send waits for the probe's answer. Let through, even spacing "
    f"resumes (W/(N-1): {sliding_log.spacing_interval(LIMITS[STANDARD]) * 1000:.0f} ms here, 0.51 s for the "
    "service's 60/30 s); refused, the bucket pauses and probes again. The replica that sent the probe wakes its "
    "waiters at the answer, the others look again every W/(N-1), and an answer that never comes holds the "
    f"bucket at most {sliding_log.PROBE_LEASE:g} s: far above a round trip, far below a call's budget. So after "
    "a pause one send is out until the counter lets one through, however long the round trip; before, sends "
    "went W/(N-1) apart whatever the round trip, so that with answers slower than that a second 429 could "
    "follow the first (the loopback test tests/pacing/test_short_windows.py shows it on the code before). The "
    "rows with 0.1 s latency (twice the spacing, no Retry-After, as the service) show no late 429; the code "
    "before had none there either, as a 1 s pause is a third of a scaled window and leaves the counter room, "
    "where against the service's 30 s windows it leaves a thirtieth. What bounds the rest: the sends already "
    "out when the first 429 comes back, before the pacer knows it faces a counter (at most ⌈round trip / "
    "stagger⌉, see above), and the spaced sends out behind a spaced send the counter refuses, should it still "
    "refuse one (⌈round trip / interval⌉).",
)


def render(rows: list[LoadRow], traces: list[TraceRow], duration: float, command: str,
           loads: tuple[float, float]) -> str:
    lines = [
        "## Pacing", "",
        f"Produced by `{command}` on loopback ({os.cpu_count()} cores shared with other work, 1-minute load average "
        f"{loads[0]:.1f} at the start, {loads[1]:.1f} at the end). Windows scaled down tenfold on both sides: "
        f"`{format_rate_limits(LIMITS)}`; margin {MARGIN} s. {CALLERS} callers on one token, closed loop for "
        f"{duration:g} s each, {round(LOGS_SHARE * 100)} % of calls reading a log page (logs + standard), the rest "
        "reading a run (standard); every call has a 20 s budget.", "",
        "- **429**: answers the sandbox refused; *late* counts those after the first third of the run.",
        "- **utilisation**: for the standard bucket (60/3 s), requests admitted in the K whole windows from the "
        "first admitted one, K = ⌊span/W⌋, over the most an exact sliding-log server admits in them, N·K. A slot "
        "frees a window after its send's answer (or its departure plus the margin m, if sooner), so a round trip r "
        "caps it near W/(W+min(r, m)) in the long run. In brackets, over the most this "
        "server's own algorithm admits: the same for a fixed window or a sliding log, N + (N-1)·(K-1) for a "
        "sliding-window counter.",
        "- **added wait**: per call, the time spent waiting for the pacer plus any pause after a 429.", "",
        "| server | replicas | requests | 429 (late) | utilisation (of this server's most) | "
        "added wait p50 / p99 | "
        "budget errors |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r.server} | {r.replicas} | {r.requests} | {r.rejected} ({r.rejected_late}) | "
                     f"{r.utilisation:.3f} ({r.of_server:.3f}) | {r.wait_p50:.2f} s / {r.wait_p99:.2f} s | "
                     f"{r.budget_errors + r.other_errors} |")
    logs = LIMITS["logs"]
    lines += [
        "", f"### Reading a {TRACE_ENTRIES:,}-entry trace ({TRACE_ENTRIES // PAGE} pages of {PAGE}; logs {logs}, "
        "bulk share 5/6, sliding-log server)", "",
        "| how | seconds | 429 | page round trip | optimum for the logs limit |",
        "|---|---|---|---|---|",
    ]
    for t in traces:
        lines.append(f"| {t.mode} | {t.seconds:.2f} | {t.rejected} | {t.rtt * 1000:.1f} ms | {t.optimum:.2f} s |")
    standard = LIMITS[STANDARD]
    spaced = (standard.count - 1) / standard.count  # W/(N-1) apart: N-1 sends per window
    lines += [
        "", "The optimum is what a client without a bulk cap could do with an empty history: "
        f"{logs.count} pages at once, the other {TRACE_ENTRIES // PAGE - logs.count} one window after their "
        "answers; page by page, the round trips of the pages after the window add up.", "",
        "### Reading the numbers", "",
        "- Against a fixed window or a sliding log the pacer sends a full window's worth as soon as the log "
        "allows, so over whole windows it matches an exact sliding-log client: the round trip it loses per window "
        f"only costs a window once it has added up to one, so {duration:g} s ({duration / standard.window:.0f} "
        f"windows) reach 1.000 while a round trip stays under {standard.window ** 2 / duration * 1000:.0f} ms.",
        "- A sliding-window counter cannot be held to the sliding-log maximum by anyone: a burst still counts "
        "in the next window. After its first 429 the pacer pauses for Retry-After, probes, and then sends evenly, "
        "W/(N-1) apart, a send that leaves a little late keeping its slot so that delays do not add up; with the "
        f"log still in force that is (N-1)/N = {spaced:.3f} of the "
        "sliding-log maximum in the long run. HTTP gives Retry-After in whole seconds, so that pause is at least "
        "1 s: a third of a scaled window here, a thirtieth of the real 30 s one; with the first window's burst it "
        f"accounts for the rest over {duration:g} s.",
        "- A hot bucket (N sends in the last two windows) spaces its sends at least "
        f"{sliding_log.HOT_STAGGER:g}·W/N apart ({sliding_log.stagger(logs) * 1000:.0f} ms for logs here) so "
        "that a counter's first 429 returns before many more requests leave. That is why the second window of "
        "the trace read takes about a second here, where a page takes a few milliseconds; against the real "
        "service a page takes longer than that gap (250 ms for logs 60/60 s), so it costs nothing there.",
        "- Added wait p99 is about one window: with demand well above the limit, a caller waits in the FIFO "
        "for the next window, which is what the limit forces.",
        *SHORT_WINDOWS, "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load per scenario")
    parser.add_argument("--write", type=Path, help="write the section into this report (e.g. docs/benchmarks.md)")
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS),
                        help=f"server algorithms to run, comma-separated (default: {','.join(ALGORITHMS)})")
    parser.add_argument("--outage", action="store_true", help="run only the Redis outage scenario")
    parser.add_argument("--outage-seconds", default="30", help="how long Redis stays down, comma-separated for "
                                                                "several runs (default: %(default)s)")
    parser.add_argument("--outage-data", default="empty",
                        help="how Redis comes back, comma-separated: empty (restarted), kept (paused; default: "
                             "%(default)s)")
    args = parser.parse_args(argv)
    algorithms = [name.strip() for name in args.algorithms.split(",") if name.strip()]
    if unknown := set(algorithms) - set(ALGORITHMS):
        parser.error(f"unknown algorithm(s): {', '.join(sorted(unknown))}")
    if set(args.outage_data.split(",")) - {"empty", "kept"}:
        parser.error("--outage-data takes empty and kept")
    if shutil.which("redis-server") is None:
        print("redis-server is not installed (apt-get install redis-server)", file=sys.stderr)
        return 2

    redis = RedisServer(shutil.which("redis-server") or "redis-server")
    redis.start()
    load_before = os.getloadavg()[0]
    if args.outage:
        outages = []
        try:
            for seconds, data in itertools.product(args.outage_seconds.split(","), args.outage_data.split(",")):
                outage = Outage(args.duration / 4, float(seconds), keeps_data=data == "kept")
                outages.append(outage_scenario(redis, args.duration, outage))
                print(outages[-1], flush=True)
        finally:
            redis.stop()
        loads = (load_before, os.getloadavg()[0])
        publish(render_outage(outages, args.duration, command_line("pacing.py", argv), loads), args.write)
        return 0
    rows: list[LoadRow] = []
    try:
        plain = [(Server(algorithm), replicas, shared) for algorithm in algorithms
                 for replicas, shared in ((1, False), (1, True), (3, True))]
        for server, replicas, shared in [*plain, *(row for row in EXTRA_ROWS if row[0].algorithm in algorithms)]:
            row = load_scenario(server, replicas, redis if shared else None, args.duration)
            print(row, flush=True)
            rows.append(row)
    finally:
        redis.stop()
    traces = [trace_scenario(parallel=False), trace_scenario(parallel=True)]
    for trace in traces:
        print(trace, flush=True)

    loads = (load_before, os.getloadavg()[0])
    publish(render(rows, traces, args.duration, command_line("pacing.py", argv), loads), args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
