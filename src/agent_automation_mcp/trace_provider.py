"""The OpenTelemetry SDK's tracer provider as this server builds it: every span bounded whatever a caller sends, and
sampling decided here, never by a caller's flag. Imported only when traces are on (tracing.start).

Bounds: span names (`MAX_NAME_CHARS`) and status messages (`MAX_VALUE_CHARS`) are cut as spans end, whoever made
them (ours, or the MCP SDK's, which names its span after the method and the tool as sent and puts an error's message
in its status); attribute values are cut when they are set (the SDK's span limits: `MAX_VALUE_CHARS` unless
`OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT` says otherwise), with the SDK's bounds on their count (128) and on events and
links. The batch processor's queue holds at most `OTEL_BSP_MAX_QUEUE_SIZE` spans (2,048) and sends at most
`OTEL_BSP_MAX_EXPORT_BATCH_SIZE` (512) at a time; past the queue, spans are dropped, never held.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Sequence
from typing import Final

from opentelemetry.context import Context
from opentelemetry.sdk.environment_variables import OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, Status, get_current_span
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

MAX_NAME_CHARS: Final = 128  # the longest of ours is ~60 ("GET /v1/organizations/{org_id}/agent/run/...")
MAX_VALUE_CHARS: Final = 1024  # an attribute's value or a status message


def tracer_provider(resource: Resource, exporter: SpanExporter) -> TracerProvider:
    """The provider, exporting through a batch processor to `exporter`, sampling as `OTEL_TRACES_SAMPLER` says for
    whatever starts here or enters from a caller."""
    limit = None if OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT in os.environ else MAX_VALUE_CHARS  # None: from the variable
    provider = TracerProvider(resource=resource, span_limits=SpanLimits(max_attribute_length=limit))
    # The sampler the variables name becomes the root of ours, before any tracer is made (each takes the provider's).
    provider.sampler = DecidedHere(provider.sampler)
    provider.add_span_processor(BoundedSpans(BatchSpanProcessor(exporter)))  # OTEL_BSP_*
    return provider


class DecidedHere(Sampler):
    """`configured` decides every trace that starts here or enters from a caller: a caller's `traceparent` keeps its
    trace id (the trace goes on) but its sampled flag decides nothing, and neither do the bits of its trace id,
    which a caller chooses (a ratio sampler reads them): a caller's trace is decided on an HMAC of its id under a
    key of this process, the same for every span of the request. A span inside a request of ours follows its
    parent, so a trace is whole or absent."""

    def __init__(self, configured: Sampler) -> None:
        self.configured = configured
        self._key = os.urandom(16)

    def should_sample(self, parent_context: Context | None, trace_id: int, name: str,
                      kind: SpanKind | None = None, attributes: Attributes = None,
                      links: Sequence[Link] | None = None, trace_state: TraceState | None = None) -> SamplingResult:
        parent = get_current_span(parent_context).get_span_context()
        if parent.is_valid and not parent.is_remote:
            decision = Decision.RECORD_AND_SAMPLE if parent.trace_flags.sampled else Decision.DROP
            return SamplingResult(decision, attributes, parent.trace_state)  # the span's first attributes
        if parent.is_valid:  # a caller's: decided as a root of ours, on an id it cannot choose
            digest = hmac.new(self._key, trace_id.to_bytes(16, "big"), hashlib.sha256).digest()
            trace_id = int.from_bytes(digest[:16], "big")
        decided = self.configured.should_sample(Context(), trace_id, name, kind, attributes, links)
        return SamplingResult(decided.decision, decided.attributes,
                              parent.trace_state if parent.is_valid else decided.trace_state)

    def get_description(self) -> str:
        return f"DecidedHere{{{self.configured.get_description()}}}"


class BoundedSpans(SpanProcessor):
    """Hands `then` each ended span with its name and status message cut to their bounds (a copy, only when one
    is too long)."""

    def __init__(self, then: SpanProcessor) -> None:
        self.then = then

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.then.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        self.then.on_end(bounded(span))

    def shutdown(self) -> None:
        self.then.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.then.force_flush(timeout_millis)


def bounded(span: ReadableSpan) -> ReadableSpan:
    status = span.status
    description = status.description or ""
    if len(span.name) <= MAX_NAME_CHARS and len(description) <= MAX_VALUE_CHARS:
        return span
    return ReadableSpan(name=span.name[:MAX_NAME_CHARS], context=span.context, parent=span.parent,
                        resource=span.resource, attributes=span.attributes, events=span.events, links=span.links,
                        kind=span.kind, status=Status(status.status_code, description[:MAX_VALUE_CHARS] or None),
                        start_time=span.start_time, end_time=span.end_time,
                        instrumentation_scope=span.instrumentation_scope)
