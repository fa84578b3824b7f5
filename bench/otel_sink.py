"""An OTLP/HTTP trace sink for the benchmark's ``--otel`` runs.

    python bench/otel_sink.py --port N

Accepts ``POST /v1/traces`` as a collector would (protobuf, decoded so that
the spans are counted) and answers ``GET /stats`` with how many exports and
spans it received. A process of its own: its CPU is not the gateway's.
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

ANSWER = ExportTraceServiceResponse().SerializeToString()


class Counts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.exports = 0
        self.spans = 0
        self.bytes = 0


counts = Counts()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        spans = sum(
            len(scope.spans)
            for resource in message.resource_spans
            for scope in resource.scope_spans
        )
        with counts.lock:
            counts.exports += 1
            counts.spans += spans
            counts.bytes += len(body)
        self._answer(ANSWER, "application/x-protobuf")

    def do_GET(self) -> None:
        with counts.lock:
            stats = {"exports": counts.exports, "spans": counts.spans, "bytes": counts.bytes}
        self._answer(json.dumps(stats).encode(), "application/json")

    def _answer(self, body: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
