"""When traces are on, off, or refused: the standard `OTEL_*` variables as the OpenTelemetry specification reads
them, and what being off costs (nothing loaded, no thread, no span); the provider's bounds and sampling, with the
SDK's own in-memory exporter. The spans themselves are checked end to end in tests/e2e/test_traces.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, StatusCode, TraceFlags, set_span_in_context

from agent_automation_mcp import trace_provider, tracing
from agent_automation_mcp.trace_provider import tracer_provider

ENDPOINT = "http://127.0.0.1:9"  # never reached: these settings turn nothing on, or are refused first


@pytest.fixture(autouse=True)
def no_otel_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize("variables", [
    {},
    {"OTEL_SERVICE_NAME": "mcp", "OTEL_TRACES_SAMPLER": "always_on"},  # how to trace, but nowhere to send them
    {"OTEL_SDK_DISABLED": "TRUE", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT},
    {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ENDPOINT},
])
def test_off_unless_an_exporter_or_endpoint_is_set_and_nothing_disables_it(
        monkeypatch: pytest.MonkeyPatch, variables: dict[str, str]) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert tracing.start() is None
    assert not tracing.enabled()
    assert tracing.span("gate") is tracing.pacing_wait(["standard"], False)  # one shared null context
    assert tracing.throttled_wait(["standard"], 1.0) is tracing.span("gate")


@pytest.mark.parametrize(("variables", "words"), [
    ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER=zipkin: this server exports traces over OTLP only"),
    ({"OTEL_TRACES_EXPORTER": "otlp,console"}, "OTLP only"),  # console would write into stdio's protocol stream
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
     "OTLP protocol grpc: this server exports traces with http/protobuf only"),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, "http/protobuf only"),
])
def test_settings_it_cannot_honour_are_refused_with_what_to_do(
        monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], words: str) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        tracing.start()
    assert not tracing.enabled()


def test_off_the_server_loads_no_sdk_starts_no_thread_and_makes_no_span() -> None:
    """In a process of its own, as the server starts: the HTTP app and the CLI imported, traces not asked for."""
    code = """
import sys, threading
from agent_automation_mcp import cli, tracing
from agent_automation_mcp.remote import app
assert tracing.start() is None
with tracing.upstream_request("GET", "/v1/x", "x", 1, None, headers := {}) as span:
    assert span is None and headers == {}
from opentelemetry import trace
loaded = [m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter", "google.protobuf"))]
print(loaded, threading.active_count(), type(trace.get_tracer_provider()).__name__)
"""
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "1", "ProxyTracerProvider"]


def test_a_refused_setting_stops_the_server_with_the_reason() -> None:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("OTEL_", "AGENT_AUTOMATION_"))}
    env["OTEL_TRACES_EXPORTER"] = "jaeger"
    done = subprocess.run([sys.executable, "-m", "agent_automation_mcp", "serve"], env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert "error: OTEL_TRACES_EXPORTER=jaeger: this server exports traces over OTLP only" in done.stderr


def caller(trace_id: int, sampled: bool) -> Context:
    """The context a caller's `traceparent` gives: a remote span of its trace."""
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
    return set_span_in_context(NonRecordingSpan(SpanContext(trace_id, 0x00F067AA0BA902B7, True, flags)))


def test_every_span_is_bounded_whatever_it_was_given() -> None:
    """With the SDK's defaults a 450 KB tool name made a 450 KB span name, attribute and status message."""
    exported = InMemorySpanExporter()
    provider = tracer_provider(Resource.create(), exported)
    huge = "x" * 450_000
    with provider.get_tracer("test").start_as_current_span(f"tools/call {huge}", attributes={
            "gen_ai.tool.name": huge, "agent_automation.pacing.buckets": ["standard", huge]}) as span:
        span.set_attribute("jsonrpc.request.id", huge)
        span.set_status(StatusCode.ERROR, f"Unknown tool: {huge}")
    with provider.get_tracer("test").start_as_current_span("short") as span:
        span.set_status(StatusCode.ERROR, "Invalid request parameters")
    provider.force_flush()
    long, short = exported.get_finished_spans()
    assert len(long.name) == trace_provider.MAX_NAME_CHARS and long.name.startswith("tools/call x")
    assert long.status.status_code is StatusCode.ERROR
    assert len(long.status.description or "") == trace_provider.MAX_VALUE_CHARS
    assert {key: len(value[1] if isinstance(value, tuple) else value) for key, value in long.attributes.items()} == {
        "gen_ai.tool.name": 1024, "agent_automation.pacing.buckets": 1024, "jsonrpc.request.id": 1024}
    assert (short.name, short.status.description) == ("short", "Invalid request parameters")  # untouched
    provider.shutdown()


def test_a_callers_flag_and_trace_id_bits_do_not_decide_sampling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_always_off")
    provider = tracer_provider(Resource.create(), InMemorySpanExporter())
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("POST /mcp", context=caller(0x4BF92F3577B34DA6A3CE929D0E0E4736, True)) as span:
        assert not span.is_recording()  # the caller's -01 asked for it; this server samples nothing
        assert format(span.get_span_context().trace_id, "032x") == "4bf92f3577b34da6a3ce929d0e0e4736"
    provider.shutdown()

    # A ratio sampler reads a trace id's low bits, which a caller picks: all zero is "always" for it.
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.5")
    provider = tracer_provider(Resource.create(), InMemorySpanExporter())
    tracer = provider.get_tracer("test")
    decided = []
    for high in range(1, 65):
        with tracer.start_as_current_span("POST /mcp", context=caller(high << 64, True)) as request:
            with tracer.start_as_current_span("gate") as inner:  # a span of ours follows the request's decision
                assert inner.is_recording() == request.is_recording()
            decided.append(request.is_recording())
    assert 0 < sum(decided) < 64  # about half; each outcome alone has a chance of 2^-64
    provider.shutdown()
