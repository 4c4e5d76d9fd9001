"""A private npm registry's two answers a package fetch needs, run on a lab host: the package
document (its versions and each tarball's URL and integrity) and the tarball. It serves one
package of one version, whose tarball holds only a package.json, and records each request's
path and Authorization header: what a registry sees of a client's credential.

    python3 npm_registry.py NAME VERSION PORT_FILE LOG_FILE
"""

import base64
import hashlib
import io
import json
import sys
import tarfile
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path


def tarball(name: str, version: str) -> bytes:
    manifest = json.dumps({"name": name, "version": version}).encode()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        info = tarfile.TarInfo("package/package.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
    return raw.getvalue()


def serve(name: str, version: str, port_file: Path, log_file: Path) -> None:
    body = tarball(name, version)
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(body).digest()).decode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with log_file.open("a") as log:
                log.write(
                    json.dumps({"path": self.path, "auth": self.headers.get("Authorization")})
                    + "\n"
                )
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            if self.path == f"/{name}":
                answer = json.dumps(
                    {
                        "name": name,
                        "dist-tags": {"latest": version},
                        "versions": {
                            version: {
                                "name": name,
                                "version": version,
                                "dist": {
                                    "tarball": f"{base}/{name}/-/{name}-{version}.tgz",
                                    "integrity": integrity,
                                },
                            }
                        },
                    }
                ).encode()
                kind = "application/json"
            elif self.path == f"/{name}/-/{name}-{version}.tgz":
                answer, kind = body, "application/octet-stream"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    port_file.write_text(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
