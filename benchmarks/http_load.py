"""The load side of the HTTP benchmarks: many MCP clients calling at once, run in a process of its own.

Each tenant is one SDK `Client` over Streamable HTTP with its own `httpx2.AsyncClient` (its own headers and
connections, as separate users would have), calling its list of calls round and round, one call in flight.
All tenants connect first; then each makes `warmup_calls` calls, unrecorded (the first calls fill the servers'
per-token caches); then all call together for `duration` seconds, measured: back to back (closed loop), or each
every `interval` seconds (an offered rate; a late call goes at once). Each phase waits for every tenant,
within a time bound. A call still in flight at the end is awaited (bounded by `call_timeout`) and its latency kept.
`run_load_process` runs this in a spawned process, so the load never shares a Python interpreter (and its GIL)
with the servers or the process that started them.
"""

from __future__ import annotations

import logging
import multiprocessing
import queue
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import anyio
import httpx2
from fleet import cpu_seconds, die_with_parent
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

Method = Literal["tools/call", "tools/list"]
ERAS = {"auto": "2026-07-28", "legacy": "2025-11-25"}  # Client(mode=...) -> the protocol era it speaks
CONNECT_TIMEOUT = 60.0  # seconds for every tenant to connect (200 handshakes on 2 busy cores take 5-25 s)
WARMUP_TIMEOUT = 90.0  # seconds for every tenant to make its warm-up calls


@dataclass(frozen=True)
class Call:
    method: Method
    tool: str = ""  # for tools/call
    arguments: dict[str, Any] = field(default_factory=dict)
    owned_ids: frozenset[int] | None = None  # when given, every run id in the result must be one of these

    @property
    def name(self) -> str:
        return self.tool if self.method == "tools/call" else self.method


@dataclass(frozen=True)
class Tenant:
    headers: dict[str, str]  # sent with every HTTP request, e.g. Authorization
    calls: tuple[Call, ...]  # called in turn, round and round


@dataclass(frozen=True)
class LoadJob:
    url: str
    mode: str  # Client(mode=...): "auto" (2026-07-28) or "legacy" (the 2025-11-25 handshake)
    tenants: tuple[Tenant, ...]
    duration: float
    warmup_calls: int = 0  # calls per tenant before the measured window, not recorded (the first fill caches)
    interval: float = 0.0  # seconds between the starts of one tenant's calls (tenants spread evenly); 0: back to back
    call_timeout: float = 30.0
    server_pids: tuple[int, ...] = ()  # processes whose CPU time over the window is measured
    secrets: tuple[str, ...] = ()  # scrubbed from every error text the load reports


@dataclass
class LoadResult:
    latencies: dict[str, list[float]] = field(default_factory=dict)  # call name -> seconds, completed calls
    errors: dict[str, int] = field(default_factory=dict)  # "tool: kind" -> count (tool errors and exceptions)
    error_samples: list[str] = field(default_factory=list)  # a few texts of errors and foreign results, scrubbed
    connect_seconds: list[float] = field(default_factory=list)  # per tenant that connected
    connect_failures: int = 0
    warmup_errors: int = 0
    in_window: int = 0  # successful calls that ended within the measured window
    foreign_results: int = 0  # successful calls whose result named a run the tenant does not own
    window: float = 0.0  # seconds from the common start to its planned end
    server_cpu: float = 0.0  # CPU seconds the server processes spent in the window
    load_cpu: float = 0.0  # CPU seconds this load process spent in the window

    @property
    def all_latencies(self) -> list[float]:
        return [value for values in self.latencies.values() for value in values]

    @property
    def rate(self) -> float:
        return self.in_window / self.window if self.window else 0.0

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())


class _Recorder:
    def __init__(self, job: LoadJob) -> None:
        self.job = job
        self.result = LoadResult()
        self._errors: Counter[str] = Counter()

    def scrub(self, text: str) -> str:
        for secret in self.job.secrets:
            text = text.replace(secret, "<token>")
        return text[:300]

    def error(self, name: str, kind: str) -> None:
        self._errors[f"{name}: {kind}"] += 1

    def sample(self, text: str) -> None:
        if len(self.result.error_samples) < 5:
            self.result.error_samples.append(self.scrub(text))

    def finish(self) -> LoadResult:
        self.result.errors = dict(self._errors)
        return self.result


def run_ids(result: dict[str, Any]) -> set[int]:
    """The runs a result is about: its own id (or agent_run_id), and the ids of a listed page (runs or items)."""
    ids = {result[key] for key in ("agent_run_id", "id") if isinstance(result.get(key), int)}
    for key in ("runs", "items"):
        ids |= {item["id"] for item in result.get(key) or ()
                if isinstance(item, dict) and isinstance(item.get("id"), int)}
    return ids


async def _call(client: Client, call: Call, recorder: _Recorder) -> str | None:
    """One call; the error kind when it failed (a tool error's kind, else None)."""
    if call.method == "tools/list":
        await client.list_tools(cache_mode="bypass")  # each call a request: the server's cost, not the client cache's
        return None
    result = await client.call_tool(call.tool, call.arguments)
    data = result.structured_content or {}
    if result.is_error:
        error = data.get("error", {})
        recorder.sample(f"{call.name}: {error.get('kind')}: {error.get('message')}")
        return str(error.get("kind", "tool_error"))
    if call.owned_ids is not None and not (seen := run_ids(data)) <= call.owned_ids:
        recorder.result.foreign_results += 1
        recorder.sample(f"{call.name}: asked {call.arguments}, answered about runs {sorted(seen)}")
    return None


class _Gate:
    """Opens when every tenant has passed it, having got there or given up."""

    def __init__(self, count: int) -> None:
        self.left = count
        self.opened = anyio.Event()

    def pass_(self) -> None:
        self.left -= 1
        if self.left <= 0:
            self.opened.set()


@dataclass
class _Phases:
    connected: _Gate
    warmed: _Gate
    warm_up: anyio.Event = field(default_factory=anyio.Event)
    start: anyio.Event = field(default_factory=anyio.Event)
    end: float = float("inf")


async def _timed_call(job: LoadJob, client: Client, call: Call, recorder: _Recorder) -> str | None:
    """One call within the call timeout: None when it succeeded, else the kind of its failure."""
    try:
        with anyio.fail_after(job.call_timeout):
            return await _call(client, call, recorder)
    except Exception as exc:  # any failure is a result of the load, to count
        recorder.sample(f"{call.name}: {type(exc).__name__}: {exc}")
        return type(exc).__name__


def _innermost(exc: BaseException) -> BaseException:
    """The first failure inside task-group exception groups, which say nothing themselves."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _tenant(job: LoadJob, tenant: Tenant, number: int, recorder: _Recorder, phases: _Phases) -> None:
    gates = [phases.connected, phases.warmed]  # the gates this tenant has still to pass
    timeout = httpx2.Timeout(job.call_timeout, read=job.call_timeout)
    began = time.monotonic()
    try:
        async with (httpx2.AsyncClient(headers=tenant.headers, timeout=timeout) as http,
                    Client(streamable_http_client(job.url, http_client=http), mode=job.mode,
                           read_timeout_seconds=job.call_timeout) as client):
            recorder.result.connect_seconds.append(time.monotonic() - began)
            gates.pop(0).pass_()
            await phases.warm_up.wait()
            for turn in range(number, number + job.warmup_calls):  # tenants start at different points of their lists
                if await _timed_call(job, client, tenant.calls[turn % len(tenant.calls)], recorder) is not None:
                    recorder.result.warmup_errors += 1
            gates.pop(0).pass_()
            await phases.start.wait()
            turn = number + job.warmup_calls
            due = time.monotonic() + job.interval * number / len(job.tenants)
            while True:
                await anyio.sleep(max(0.0, due - time.monotonic()))
                if time.monotonic() >= phases.end:
                    break
                due += job.interval
                call = tenant.calls[turn % len(tenant.calls)]
                turn += 1
                sent = time.monotonic()
                kind = await _timed_call(job, client, call, recorder)
                ended = time.monotonic()
                if kind is None:
                    recorder.result.latencies.setdefault(call.name, []).append(ended - sent)
                    recorder.result.in_window += ended <= phases.end
                else:
                    recorder.error(call.name, kind)
    except Exception as exc:  # a tenant that could not connect is counted; the others go on
        cause = _innermost(exc)
        recorder.result.connect_failures += len(gates) == 2
        recorder.error("connect" if len(gates) == 2 else "session", type(cause).__name__)
        recorder.sample(f"{type(cause).__name__}: {cause}")
    for gate in gates:
        gate.pass_()


async def run_load(job: LoadJob) -> LoadResult:
    """Connect every tenant, warm up, then call from all of them at once for `job.duration` seconds."""
    recorder = _Recorder(job)
    phases = _Phases(_Gate(len(job.tenants)), _Gate(len(job.tenants)))
    with anyio.fail_after(CONNECT_TIMEOUT + WARMUP_TIMEOUT + job.duration + 2 * job.call_timeout):
        async with anyio.create_task_group() as tg:
            for number, tenant in enumerate(job.tenants):
                tg.start_soon(_tenant, job, tenant, number, recorder, phases)
            with anyio.move_on_after(CONNECT_TIMEOUT):
                await phases.connected.opened.wait()
            phases.warm_up.set()
            with anyio.move_on_after(WARMUP_TIMEOUT):
                await phases.warmed.opened.wait()
            phases.end = time.monotonic() + job.duration
            recorder.result.window = job.duration
            phases.start.set()
            before = _cpu(job.server_pids)
            await anyio.sleep(job.duration)
            after = _cpu(job.server_pids)
            recorder.result.server_cpu, recorder.result.load_cpu = after[0] - before[0], after[1] - before[1]
    return recorder.finish()


def _cpu(pids: tuple[int, ...]) -> tuple[float, float]:
    """CPU seconds so far: of the server processes together, and of this process."""
    return sum(cpu_seconds(pid) for pid in pids), time.process_time()


def _load_process(job: LoadJob, results: Any) -> None:
    die_with_parent()  # its result would have no reader: a pipe that never drains would keep it alive
    logging.getLogger("mcp").setLevel(logging.ERROR)  # not a warning per legacy session the server already forgot
    results.put(asdict(anyio.run(run_load, job)))


def run_load_process(job: LoadJob) -> LoadResult:
    """`run_load` in a spawned process; killed if it outlives its own bounds by a minute."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    process = context.Process(target=_load_process, args=(job, results), daemon=True)
    process.start()
    deadline = time.monotonic() + CONNECT_TIMEOUT + WARMUP_TIMEOUT + job.duration + 2 * job.call_timeout + 60
    try:
        while time.monotonic() < deadline:
            try:
                return LoadResult(**results.get(timeout=1))
            except queue.Empty:
                if not process.is_alive() and results.empty():
                    raise RuntimeError(f"the load process ended without a result ({process.exitcode})") from None
        raise RuntimeError("the load process gave no result in time")
    finally:
        process.join(timeout=10)
        if process.is_alive():
            process.kill()
            process.join(timeout=5)
