"""When traces are on, off, or refused: the standard `OTEL_*` variables as the OpenTelemetry specification reads
them, and what being off costs (nothing loaded, no thread, no span). The spans themselves are checked end to end
in tests/e2e/test_traces.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agent_automation_mcp import tracing

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
