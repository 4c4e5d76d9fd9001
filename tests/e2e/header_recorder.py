"""A listener a cluster user runs in a job behind the portal's /rnode/ proxy: it answers every
GET and appends the request's headers, one JSON object a line, to a file of its user's."""

import http.server
import json
import sys
from pathlib import Path


def main() -> None:
    host, port, record = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with record.open("a", encoding="utf-8") as out:
                out.write(json.dumps(dict(self.headers.items())) + "\n")
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"recorded\n")

    http.server.HTTPServer((host, port), Recorder).serve_forever()


if __name__ == "__main__":
    main()
