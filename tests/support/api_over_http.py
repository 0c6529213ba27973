"""A :class:`LocalApi` (the api function in this process) on a loopback HTTP port, for a function that calls the
API as a client does (the synthetic job) inside a test's local cloud: POST and GET /recipes, as API Gateway
passes them on; nothing else (``chuixiang serve`` is the full front door)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from chuixiang_local.gateway.api_client import LocalApi


@contextmanager
def api_over_http(api: LocalApi) -> Iterator[str]:
    """The base URL while the context lasts."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, method: str) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length).decode() if length else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, doc = api.request(method, self.path, body, headers)
            payload = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:  # http.server's name
            self._answer("POST")

        def do_GET(self) -> None:  # http.server's name
            self._answer("GET")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
