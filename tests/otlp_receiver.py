"""An OTLP/HTTP trace receiver, run as its own process: what the driver's exporter sends is
decoded with OpenTelemetry's own protocol definitions (opentelemetry-proto) and written out,
one JSON line per span. No OpenTelemetry Collector can be installed here (no container
registry, no package), so this stands in for one; it speaks the protocol, it does not
replace the SDK.

    python tests/otlp_receiver.py SPANS_FILE PORT_FILE
"""

import gzip
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Lock

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

TRACES_PATH = "/v1/traces"


def plain(value: AnyValue) -> object:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [plain(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: plain(item.value) for item in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind) if kind else None


def spans_of(request: ExportTraceServiceRequest) -> list[dict]:
    found = []
    for resource_spans in request.resource_spans:
        resource = {item.key: plain(item.value) for item in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(
                    {
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "name": span.name,
                        "start_ns": span.start_time_unix_nano,
                        "end_ns": span.end_time_unix_nano,
                        "status": {"code": span.status.code, "message": span.status.message},
                        "attributes": {item.key: plain(item.value) for item in span.attributes},
                        "resource": resource,
                    }
                )
    return found


def serve(spans_file: Path, port_file: Path) -> None:
    written = Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != TRACES_PATH:
                self.send_error(404)
                return
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.headers.get("Content-Type") != "application/x-protobuf":
                self.send_error(415, "OTLP/HTTP protobuf only")
                return
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            with written, spans_file.open("a") as out:
                for span in spans_of(request):
                    out.write(json.dumps(span) + "\n")
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    spans_file.touch()
    port_file.write_text(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    serve(Path(sys.argv[1]), Path(sys.argv[2]))
