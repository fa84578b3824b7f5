"""An OTLP/HTTP trace collector for tests: ``POST /v1/traces`` decoded with
the ``opentelemetry-proto`` messages, the spans kept for assertions."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanMessage

from tests.support import serve_in_thread


@dataclass(frozen=True)
class Span:
    name: str
    kind: str  # SERVER, CLIENT, INTERNAL
    trace_id: str
    span_id: str
    parent_id: str
    start_ns: int
    end_ns: int
    status: str  # UNSET, OK, ERROR
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def _attributes(items) -> dict[str, Any]:
    return {item.key: _value(item.value) for item in items}


class Collector:
    """Listens on a port of loopback; ``url`` is what ``OTEL_EXPORTER_OTLP_ENDPOINT`` takes."""

    def __init__(self) -> None:
        self.exports: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                message = ExportTraceServiceRequest()
                message.ParseFromString(body)
                with collector._lock:
                    collector.exports.append(message)
                    collector.paths.append(self.path)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = serve_in_thread(self.server)

    def spans(self) -> list[Span]:
        with self._lock:
            exports = list(self.exports)
        found = []
        for export in exports:
            for resource_spans in export.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        found.append(
                            Span(
                                name=span.name,
                                kind=SpanMessage.SpanKind.Name(span.kind).removeprefix(
                                    "SPAN_KIND_"
                                ),
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_id=span.parent_span_id.hex(),
                                start_ns=span.start_time_unix_nano,
                                end_ns=span.end_time_unix_nano,
                                status=span.status.StatusCode.Name(span.status.code).removeprefix(
                                    "STATUS_CODE_"
                                ),
                                attributes=_attributes(span.attributes),
                                resource=resource,
                                scope=scope_spans.scope.name,
                            )
                        )
        return found

    def trace(self, trace_id: str) -> list[Span]:
        return [s for s in self.spans() if s.trace_id == trace_id]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
