"""The demo page (``clients/demo``), served by ``chuixiang serve --demo-port`` on an origin of its own.

It calls the API cross-origin, as a web front end on another host does, so CORS is exercised for real: the
page's origin must be in ``CorsAllowOrigins`` (serve adds it when it is not). Files are served from a fixed
list; ``/config.js`` tells the page where the API is.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from stack_template import REPO_ROOT

#: Path -> (file, content type). Nothing else is served.
FILES = {
    "/": ("clients/demo/index.html", "text/html; charset=utf-8"),
    "/index.html": ("clients/demo/index.html", "text/html; charset=utf-8"),
    "/demo.css": ("clients/demo/demo.css", "text/css; charset=utf-8"),
    "/demo.js": ("clients/demo/demo.js", "text/javascript; charset=utf-8"),
    "/client.js": ("clients/js/index.js", "text/javascript; charset=utf-8"),
}


def demo_origin(host: str, port: int) -> str:
    return f"http://{host}:{port}"


class DemoSite:
    """The demo page on ``host:port``, pointed at the API at ``api_base``; ``start`` serves it on a thread."""

    def __init__(self, host: str, port: int, api_base: str) -> None:
        config = f"export const API_BASE = {api_base!r};\n".replace("'", '"').encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server's name
                path = self.path.split("?", 1)[0]
                if path == "/config.js":
                    self._answer(200, "text/javascript; charset=utf-8", config)
                elif path in FILES:
                    name, content_type = FILES[path]
                    self._answer(200, content_type, (REPO_ROOT / name).read_bytes())
                else:
                    self._answer(404, "text/plain; charset=utf-8", b"not found")

            def _answer(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.origin = demo_origin(host, self.server.server_address[1])

    def start(self) -> None:
        threading.Thread(target=self.server.serve_forever, name="demo-site", daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
