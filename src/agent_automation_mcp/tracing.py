"""OpenTelemetry traces: off unless the standard `OTEL_*` variables ask for them; then one trace per request.

Off (the default) nothing more is imported or started, and every function here returns at once: no span is
made, not even the API's no-op one. On (`start`), the SDK exports over OTLP, HTTP with protobuf, from a batch
thread, every span bounded and sampled as `trace_provider` says. A request's trace holds our `/mcp` span (remote
only), the gate's with its token check, the SDK's span for the MCP method (`mcp.server._otel`, which finds the
provider through the API's global), and inside it ours for a wait for the tenant's slot, each pacing wait, each
upstream request and the confirmation. The gate's spans are made before the request's parent is known (it may be
in the body, read once the caller is): they are kept (`recorded`) and written with their own times once the
request's span starts. No span holds a token, a query's values, a body or an exception's message; the tenant is
named by `logs.tenant_id`'s HMAC only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN_CONTEXT, Span, SpanContext, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from . import __version__
from .logs import PROG

if TYPE_CHECKING:
    from starlette.types import Scope

PROTOCOL: Final = "http/protobuf"  # the exporter without grpcio: requests and protobuf, which a few spans a call need
DEFAULT_ENDPOINT: Final = "http://localhost:4318"  # the specification's default for OTLP over HTTP

_tracer: Tracer | None = None  # None: tracing is off
# W3C trace context only, in and out, whatever OTEL_PROPAGATORS says: a caller's baggage is never sent to the service.
_W3C: Final = TraceContextTextMapPropagator()
_OFF: Final[AbstractContextManager[None]] = nullcontext()


class KeptSpan(Span):
    """A span made before its request's trace is known, kept until `serving` writes it, with its times, under the
    request's span (`recorded`)."""

    def __init__(self, name: str, kind: SpanKind = SpanKind.INTERNAL,
                 attributes: Mapping[str, AttributeValue] | None = None) -> None:
        self.name, self.kind, self.attributes = name, kind, dict(attributes or {})
        self.start_time, self.end_time = time.time_ns(), 0
        self.status: Status | StatusCode | None = None
        self.children: list[KeptSpan] = []

    def end(self, end_time: int | None = None) -> None:
        self.end_time = end_time or time.time_ns()

    def get_span_context(self) -> SpanContext:
        return INVALID_SPAN_CONTEXT  # nothing may refer to it: it is no span yet

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        self.attributes.update(attributes)

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        self.attributes[key] = value

    def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
        """Events are not kept: none of ours makes one."""

    def update_name(self, name: str) -> None:
        self.name = name

    def is_recording(self) -> bool:
        return True

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        self.status = status

    def record_exception(self, exception: BaseException, attributes: Any = None, timestamp: int | None = None,
                         escaped: bool = False) -> None:
        """Never: an exception is named by its type only (`_span`)."""


# While a request's trace is not known yet: the kept span that spans made now go under.
_keeping: ContextVar[KeptSpan | None] = ContextVar("keeping", default=None)


def start() -> str | None:
    """Turn tracing on if the environment asks for it, as the OpenTelemetry specification reads it: an OTLP
    endpoint, or `OTEL_TRACES_EXPORTER=otlp`; never with `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`.
    Returns what to tell the operator (None when off); `ValueError` for a setting it cannot honour."""
    global _tracer
    environ = os.environ
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporters = {name.strip().lower() for name in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if name.strip()}
    if "none" in exporters:
        return None
    if exporters - {"otlp"}:
        raise ValueError(f"OTEL_TRACES_EXPORTER={environ['OTEL_TRACES_EXPORTER']}: this server exports traces over "
                         "OTLP only (otlp, or none to turn them off)")
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):  # e.g. under opentelemetry-instrument
        _tracer = trace.get_tracer(__name__, __version__)
        return "traces go to the OpenTelemetry provider set before the server started"
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not exporters and not endpoint:
        return None
    protocol = (environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or PROTOCOL).strip()
    if protocol != PROTOCOL:
        raise ValueError(f"OTLP protocol {protocol}: this server exports traces with {PROTOCOL} only (unset "
                         "OTEL_EXPORTER_OTLP_PROTOCOL, or point it at a collector's HTTP port, 4318)")
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource

        from .trace_provider import tracer_provider
    except ImportError:
        raise ValueError("traces are asked for (OTEL_* variables), but the OpenTelemetry SDK is not installed: "
                         "pip install 'agent-automation-mcp[otel]', or unset them") from None
    resource = Resource.create()  # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
    ours = {SERVICE_NAME: PROG} if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service") else {}
    if SERVICE_VERSION not in resource.attributes:
        ours[SERVICE_VERSION] = __version__
    provider = tracer_provider(resource.merge(Resource(ours)), OTLPSpanExporter())  # OTEL_EXPORTER_OTLP_*
    trace.set_tracer_provider(provider)
    _tracer = provider.get_tracer(__name__, __version__)
    where = urlsplit(endpoint or DEFAULT_ENDPOINT)  # named without any user or password it may hold
    port = f":{where.port}" if where.port else ""
    return f"exporting traces over OTLP ({PROTOCOL}) to {where.scheme}://{where.hostname}{port}"



def enabled() -> bool:
    return _tracer is not None


def span(name: str, attributes: Mapping[str, AttributeValue] | None = None, *, kind: SpanKind = SpanKind.INTERNAL,
         context: Context | None = None) -> AbstractContextManager[Span | None]:
    """A span around the block, current inside it; nothing at all when tracing is off."""
    if _tracer is None:
        return _OFF
    return _span(_tracer, name, attributes, kind, context)


@contextmanager
def _span(tracer: Tracer, name: str, attributes: Mapping[str, AttributeValue] | None, kind: SpanKind,
          context: Context | None, start_time: int | None = None) -> Iterator[Span]:
    # An exception is named by its type only: a message may quote a URL with its query, or the service's words.
    keeping = _keeping.get()
    made = (_kept(keeping, name, kind, attributes) if keeping is not None else
            tracer.start_as_current_span(name, context=context, kind=kind, attributes=attributes,
                                         start_time=start_time, record_exception=False,
                                         set_status_on_exception=False))
    with made as current:
        try:
            yield current
        except BaseException as exc:
            current.set_attribute("error.type", type(exc).__qualname__)
            current.set_status(StatusCode.ERROR)
            raise


@contextmanager
def _kept(parent: KeptSpan | None, name: str, kind: SpanKind = SpanKind.INTERNAL,
          attributes: Mapping[str, AttributeValue] | None = None) -> Iterator[KeptSpan]:
    """A kept span, current inside the block: a child of `parent`, or (None) the root that holds a request's."""
    kept = KeptSpan(name, kind, attributes)
    if parent is not None:
        parent.children.append(kept)
    token = _keeping.set(kept)
    try:
        yield kept
    finally:
        _keeping.reset(token)
        kept.end()


@contextmanager
def recorded() -> Iterator[KeptSpan | None]:
    """Spans made inside are kept, not exported, until `serving` knows the request's parent (it may be in the body,
    which is read once the caller is known) and writes them under the request's span; None when tracing is off.
    Their requests to the service carry no trace context (there is none yet)."""
    if _tracer is None:
        yield None
        return
    with _kept(None, "request") as root:  # holds the times, and the spans made meanwhile as its children
        yield root


def _write(tracer: Tracer, spans: Sequence[KeptSpan], parent: Span) -> None:
    for kept in spans:
        span = tracer.start_span(kept.name, context=trace.set_span_in_context(parent), kind=kept.kind,
                                 attributes=kept.attributes, start_time=kept.start_time, record_exception=False,
                                 set_status_on_exception=False)
        if kept.status is not None:
            span.set_status(kept.status)
        _write(tracer, kept.children, span)
        span.end(end_time=kept.end_time or None)


def note(span: Span | None, attributes: Mapping[str, AttributeValue]) -> None:
    if span is not None:
        span.set_attributes(attributes)


def trace_id(span: Span | None) -> str | None:
    """The span's trace id as trace backends show it (32 hex digits), for a log line that leads to its trace."""
    if span is None:
        return None
    context = span.get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


# The seams: each is one call from the module that does the work.

def pacing_wait(buckets: Sequence[str], bulk: bool) -> AbstractContextManager[Span | None]:
    if _tracer is None:
        return _OFF
    return _span(_tracer, "pacing wait", {"agent_automation.pacing.buckets": list(buckets),
                                          "agent_automation.pacing.bulk": bulk}, SpanKind.INTERNAL, None)


def throttled_wait(buckets: Sequence[str], seconds: float) -> AbstractContextManager[Span | None]:
    """The wait a 429 asked for before the request is sent again: a pacing wait the service set."""
    if _tracer is None:
        return _OFF
    return _span(_tracer, "pacing wait", {"agent_automation.pacing.buckets": list(buckets),
                                          "agent_automation.pacing.wait_seconds": round(seconds, 6),
                                          "agent_automation.pacing.after": "429"}, SpanKind.INTERNAL, None)


def paced(span: Span | None, waited: float, shared: bool) -> None:
    """How long the wait was, and whether the send was charged in Redis (shared by every replica) or here only."""
    if span is None:
        return
    note(span, {"agent_automation.pacing.wait_seconds": round(waited, 6),
                "agent_automation.pacing.ledger": "shared" if shared else "local"})


def upstream_request(method: str, template: str, operation: str, attempt: int, retry_reason: str | None,
                     headers: dict[str, str]) -> AbstractContextManager[Span | None]:
    """A client span for one HTTP request to the service, whose `traceparent` goes into `headers`: the path's
    template, never its values, the query or the body."""
    if _tracer is None:
        return _OFF
    attributes: dict[str, AttributeValue] = {"http.request.method": method, "url.template": template,
                                             "agent_automation.operation": operation}
    if attempt > 1:
        attributes["http.request.resend_count"] = attempt - 1
    if retry_reason is not None:
        attributes["agent_automation.retry_reason"] = retry_reason
    return _injecting(_span(_tracer, f"{method} {template}", attributes, SpanKind.CLIENT, None), headers)


@contextmanager
def _injecting(within: AbstractContextManager[Span], headers: dict[str, str]) -> Iterator[Span]:
    with within as current:
        _W3C.inject(headers)  # traceparent (and tracestate) of this span: the trace goes on in the service
        yield current


def upstream_answered(span: Span | None, status: int | None, outcome: str) -> None:
    if span is None:
        return
    if status is not None:
        span.set_attribute("http.response.status_code", status)
    span.set_attribute("agent_automation.outcome", outcome)
    if status is None or status >= 400:
        span.set_attribute("error.type", str(status) if status is not None else outcome)
        span.set_status(StatusCode.ERROR)


# A request to `/mcp`: its span is the trace's first of ours.

def incoming(scope: Scope, meta: Mapping[str, Any] | None) -> Context | None:
    """The caller's trace context: W3C `traceparent` as an HTTP header, else in the JSON-RPC request's
    `params._meta` (where MCP clients put it, the SDK's own included), as the request's one reading of its body
    found it (remote/rpc_request.py: read only once the caller is known)."""
    if _tracer is None:
        return None
    carrier = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope.get("headers", ())
               if name in (b"traceparent", b"tracestate")}
    if "traceparent" not in carrier and meta is not None:
        carrier = {key: meta[key] for key in ("traceparent", "tracestate") if isinstance(meta.get(key), str)}
    return _W3C.extract(carrier) if "traceparent" in carrier else None


def serving(scope: Scope, parent: Context | None, kept: KeptSpan | None = None) -> AbstractContextManager[Span | None]:
    """The span of one `/mcp` request, from the time `kept` was (`recorded`), with the spans kept meanwhile in it."""
    if _tracer is None:
        return _OFF
    return _serving(_tracer, scope, parent, kept)


@contextmanager
def _serving(tracer: Tracer, scope: Scope, parent: Context | None, kept: KeptSpan | None) -> Iterator[Span]:
    with _span(tracer, f"{scope['method']} {scope['path']}",
               {"http.request.method": scope["method"], "http.route": scope["path"], "url.path": scope["path"],
                "url.scheme": scope.get("scheme", "http")}, SpanKind.SERVER, parent,
               kept.start_time if kept is not None else None) as span:
        if kept is not None:
            _write(tracer, kept.children, span)
        yield span


def served(span: Span | None, status: int, request_id: str, tenant: str | None) -> None:
    if span is None:
        return
    span.set_attributes({"http.response.status_code": status, "agent_automation.request_id": request_id})
    if tenant is not None:
        span.set_attribute("agent_automation.tenant", tenant)
    if status >= 500:
        span.set_attribute("error.type", str(status))
        span.set_status(StatusCode.ERROR)
