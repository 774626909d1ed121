"""A real OTLP/HTTP receiver on loopback: ``POST /v1/traces`` and ``POST /v1/logs`` decoded with the protocol's own
messages (the opentelemetry-proto package), every span and log record kept with its resource, and every body's bytes
kept as they came (to look for what must never be sent)."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def value_of(any_value: Any) -> Any:
    """An OTLP AnyValue as a Python value."""
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in any_value.kvlist_value.values}
    return getattr(any_value, kind) if kind else None


def attributes_of(items: Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in items}


class OTLPReceiver:
    def __init__(self) -> None:
        #: each span: name, trace and span ids (hex), parent id (hex or ""), kind, status, attributes, times, resource
        self.spans: list[dict[str, Any]] = []
        #: each log record: event name, trace and span ids, attributes, resource
        self.events: list[dict[str, Any]] = []
        self.bodies: list[bytes] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> OTLPReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _traces(self, data: bytes) -> bytes:
        request = ExportTraceServiceRequest.FromString(data)
        for resource_spans in request.resource_spans:
            resource = attributes_of(resource_spans.resource.attributes)
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    self.spans.append({
                        "name": span.name, "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                        "parent_id": span.parent_span_id.hex(), "kind": span.kind, "status": span.status.code,
                        "status_message": span.status.message, "attributes": attributes_of(span.attributes),
                        "start": span.start_time_unix_nano, "end": span.end_time_unix_nano, "resource": resource})
        return ExportTraceServiceResponse().SerializeToString()

    def _logs(self, data: bytes) -> bytes:
        request = ExportLogsServiceRequest.FromString(data)
        for resource_logs in request.resource_logs:
            resource = attributes_of(resource_logs.resource.attributes)
            for scope in resource_logs.scope_logs:
                for record in scope.log_records:
                    self.events.append({
                        "event_name": record.event_name, "trace_id": record.trace_id.hex(),
                        "span_id": record.span_id.hex(), "attributes": attributes_of(record.attributes),
                        "time": record.time_unix_nano, "resource": resource})
        return ExportLogsServiceResponse().SerializeToString()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    data = gzip.decompress(data)
                with receiver._lock:
                    receiver.bodies.append(data)
                    if self.path == "/v1/traces":
                        answer = receiver._traces(data)
                    elif self.path == "/v1/logs":
                        answer = receiver._logs(data)
                    else:
                        answer = None
                self.send_response(200 if answer is not None else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer or b"")))
                self.end_headers()
                self.wfile.write(answer or b"")

        return Handler
