"""OpenTelemetry traces: off unless the standard `OTEL_*` variables ask for them; then one trace per request.

Off (the default) nothing more is imported or started, and every function here returns at once: no span is
made, not even the API's no-op one. On (`start`), the SDK exports over OTLP, HTTP with protobuf, from a batch
thread, every span bounded and sampled as `trace_provider` says. A request's trace holds our `/mcp` span (remote
only), the gate's with its token check, the SDK's span for the MCP method (`mcp.server._otel`, which finds the
provider through the API's global), and inside it ours for a wait for the tenant's slot, each pacing wait, each
upstream request and the confirmation. No span holds a
token, a query's values, a body or an exception's message; the tenant is named by `logs.tenant_id`'s HMAC only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, StatusCode, Tracer
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
          context: Context | None) -> Iterator[Span]:
    # An exception is named by its type only: a message may quote a URL with its query, or the service's words.
    with tracer.start_as_current_span(name, context=context, kind=kind, attributes=attributes,
                                      record_exception=False, set_status_on_exception=False) as current:
        try:
            yield current
        except BaseException as exc:
            current.set_attribute("error.type", type(exc).__qualname__)
            current.set_status(StatusCode.ERROR)
            raise


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
    found it (remote/rpc_request.py)."""
    if _tracer is None:
        return None
    carrier = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope.get("headers", ())
               if name in (b"traceparent", b"tracestate")}
    if "traceparent" not in carrier and meta is not None:
        carrier = {key: meta[key] for key in ("traceparent", "tracestate") if isinstance(meta.get(key), str)}
    return _W3C.extract(carrier) if "traceparent" in carrier else None


def serving(scope: Scope, parent: Context | None) -> AbstractContextManager[Span | None]:
    """The span of one `/mcp` request (a listening stream's lasts as long as the stream)."""
    if _tracer is None:
        return _OFF
    return _span(_tracer, f"{scope['method']} {scope['path']}",
                 {"http.request.method": scope["method"], "http.route": scope["path"], "url.path": scope["path"],
                  "url.scheme": scope.get("scheme", "http")}, SpanKind.SERVER, parent)


def served(span: Span | None, status: int, request_id: str, tenant: str | None) -> None:
    if span is None:
        return
    span.set_attributes({"http.response.status_code": status, "agent_automation.request_id": request_id})
    if tenant is not None:
        span.set_attribute("agent_automation.tenant", tenant)
    if status >= 500:
        span.set_attribute("error.type", str(status))
        span.set_status(StatusCode.ERROR)
