"""A trace collector for tests: OTLP over HTTP with protobuf on loopback, decoded with `opentelemetry-proto`.

It keeps every export's raw bytes too, so a test can look for what must never leave the server.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

KINDS = {Span.SPAN_KIND_INTERNAL: "internal", Span.SPAN_KIND_SERVER: "server", Span.SPAN_KIND_CLIENT: "client"}


@dataclass(frozen=True)
class Received:
    """One exported span, flattened: ids in hex, attributes as Python values, the resource's attributes."""

    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    error: bool


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, which) if which else None


class OtlpReceiver:
    def __init__(self) -> None:
        self.exports: list[bytes] = []  # each request's body, as sent
        self.spans: list[Received] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces" or self.headers.get("content-type") != "application/x-protobuf":
                    self.send_error(404 if self.path != "/v1/traces" else 415)
                    return
                receiver._keep(body)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _keep(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        spans = []
        for resource_spans in request.resource_spans:
            resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(Received(
                        name=span.name, kind=KINDS.get(span.kind, str(span.kind)), trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(), parent_id=span.parent_span_id.hex(),
                        attributes={kv.key: _value(kv.value) for kv in span.attributes}, resource=resource,
                        error=span.status.code == span.status.STATUS_CODE_ERROR))
        with self._lock:
            self.exports.append(body)
            self.spans.extend(spans)

    def wait_for(self, found: Callable[[list[Received]], bool], seconds: float = 15) -> list[Received]:
        """The spans received so far, once `found` says they hold what the test waits for (bounded)."""
        deadline = time.monotonic() + seconds
        while True:
            with self._lock:
                spans = list(self.spans)
            if found(spans):
                return spans
            if time.monotonic() > deadline:
                raise AssertionError(f"not exported within {seconds} s; got {[s.name for s in spans]}")
            time.sleep(0.05)


@contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    thread = threading.Thread(target=receiver._server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver._server.shutdown()
        receiver._server.server_close()
        thread.join(5)
