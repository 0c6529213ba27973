"""Keep-alive connections for the moto server.

werkzeug's development server ends every response with ``Connection: close``: its handler cannot
tell where a request body ends, so it reads whatever is left on the socket and hangs up. Every AWS
call of every local function then opens a new TCP connection, and the server accepts it and starts
a new thread for it: measured, 16 % of moto's CPU per DynamoDB call, in the one process every call
of every function waits on. A DynamoDB or S3 request says how long its body is, so this
handler reads exactly that much before the application runs, answers with a ``Content-Length``, and
keeps the connection for the client's next call. A chunked request body is left to werkzeug's own
handler, which closes the connection as before.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import logging
import socket
import threading
from http import HTTPStatus
from typing import Any

from werkzeug.serving import WSGIRequestHandler

#: http.client's limits on a request's headers: how many, and how long a line.
_MAX_HEADERS, _MAX_LINE = 100, 65536
#: Responses that never carry a body, whatever their headers say (RFC 9110 §6.4.1).
_NO_BODY = {204, 304}


class OpenConnections:
    """The connections a server keeps open, so that stopping it can hang up on them: an idle
    keep-alive connection's thread waits for a next request that may never come."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    def discard(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)

    def close_all(self) -> None:
        with self._lock:
            sockets, self._sockets = list(self._sockets), set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked reading it; it then closes it


def _read_headers(rfile: Any) -> http.client.HTTPMessage | tuple[HTTPStatus, str]:
    """A request's header lines, parsed as ``email``'s compat32 policy does; else the error to answer."""
    headers = http.client.HTTPMessage()
    for _ in range(_MAX_HEADERS + 1):
        line = rfile.readline(_MAX_LINE + 1)
        if line in (b"\r\n", b"\n", b""):
            return headers
        text = line.decode("iso-8859-1")
        name, colon, value = text.partition(":")
        if len(line) > _MAX_LINE or not colon or text[0] in " \t":  # too long, not a header, folded
            return HTTPStatus.BAD_REQUEST, "Bad header line"
        headers.set_raw(name, value.lstrip(" \t").rstrip("\r\n"))
    return HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers"


def _path(target: str) -> str:
    """A request target as ``http.server`` keeps it (a leading ``//`` folded: gh-87389)."""
    return "/" + target.lstrip("/") if target.startswith("//") else target


def _closes(headers: http.client.HTTPMessage, version: str) -> bool:
    """Whether the client asked to close after this answer (HTTP/1.0 closes unless it asked to keep alive)."""
    connection = headers.get("Connection", "").lower()
    return connection == "close" or (version == "HTTP/1.0" and connection != "keep-alive")


def _collect(app: Any, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    """Run the WSGI ``app`` and collect its whole answer (moto's answers are small)."""
    started: list[Any] = []
    chunks: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        started[:] = [status, headers]
        return chunks.append

    result = app(environ, start_response)
    try:
        chunks.extend(result)
    finally:
        if hasattr(result, "close"):
            result.close()
    return started[0], started[1], b"".join(chunks)


def _kept_headers(headers: list[tuple[str, str]], bodiless: bool) -> list[tuple[str, str]]:
    """The app's headers this handler passes on: it frames the answer itself (a HEAD keeps the length it
    describes)."""
    dropped = {"connection", "transfer-encoding"} | (set() if bodiless else {"content-length"})
    return [(k, v) for k, v in headers if k.lower() not in dropped]


class _KeepAlive(WSGIRequestHandler):
    """What ``keep_alive_handler`` adds to moto's handler (it comes first in the subclass's MRO: ``super()`` is
    moto's)."""

    protocol_version = "HTTP/1.1"
    connections: OpenConnections

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connections.add(self.connection)

    def finish(self) -> None:
        self.connections.discard(self.connection)
        super().finish()

    def parse_request(self) -> bool:
        """``http.server`` parses headers with the email package (~5 % of moto's CPU per DynamoDB call,
        measured). A request as HTTP/1.x clients send it is parsed here into the same
        ``HTTPMessage``; anything else goes to ``http.server``, which answers its errors."""
        requestline = self.raw_requestline.decode("iso-8859-1").rstrip("\r\n")
        words = requestline.split()
        if len(words) != 3 or words[2] not in ("HTTP/1.1", "HTTP/1.0"):
            return bool(super().parse_request())
        self.requestline, self.request_version = requestline, words[2]
        self.command, self.path = words[0], _path(words[1])
        headers = _read_headers(self.rfile)
        if isinstance(headers, tuple):
            self.close_connection = True
            self.send_error(*headers)
            return False
        self.headers = headers
        self.close_connection = _closes(headers, words[2])
        if headers.get("Expect", "").lower() == "100-continue" and words[2] == "HTTP/1.1":
            return bool(self.handle_expect_100())
        return True

    def run_wsgi(self) -> None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            super().run_wsgi()  # werkzeug's handler: it dechunks, then closes the connection
            return
        body = self._read_body()
        if body is None:
            self.close_connection = True
            return
        environ = self.make_environ()
        environ["wsgi.input"] = io.BytesIO(body)
        self.environ = environ
        status, headers, payload = self._call(environ)
        self._respond(environ, status, headers, payload)

    def _read_body(self) -> bytes | None:
        """The body its ``Content-Length`` declares; None when it cannot be read (a 400 answered, or the
        client hung up mid-body)."""
        declared = self.headers.get("Content-Length") or "0"
        if not declared.isdigit():
            self.send_error(HTTPStatus.BAD_REQUEST, "Bad Content-Length")
            return None
        length = int(declared)
        body: bytes = self.rfile.read(length) if length > 0 else b""
        return body if len(body) == length else None

    def _call(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
        """Run the application and collect its whole answer (moto's answers are small)."""
        try:
            return _collect(self.server.app, environ)
        except Exception:  # as werkzeug: log it, answer 500, hang up
            logging.getLogger("werkzeug").exception("Error on request")
            self.close_connection = True
            return "500 INTERNAL SERVER ERROR", [("Content-Type", "text/plain")], b"Internal Server Error"

    def _respond(self, environ: dict[str, Any], status: str, headers: list[tuple[str, str]], payload: bytes) -> None:
        code_text, _, reason = status.partition(" ")
        code = int(code_text)
        bodiless = environ["REQUEST_METHOD"] == "HEAD" or code in _NO_BODY or 100 <= code < 200
        self.send_response(code, reason)
        for key, value in _kept_headers(headers, bodiless):
            self.send_header(key, value)
        if not bodiless:
            self.send_header("Content-Length", str(len(payload)))
        if self.close_connection:
            self.send_header("Connection", "close")
        # Head and body in one write: a small body sent after its head would wait for the
        # client's delayed ACK (Nagle's algorithm), 40 ms on Linux loopback.
        self._headers_buffer.append(b"\r\n" + (b"" if bodiless else payload))
        self.flush_headers()


def keep_alive_handler(base: type[WSGIRequestHandler], connections: OpenConnections) -> type[WSGIRequestHandler]:
    """A subclass of ``base`` (moto's handler: it keeps its header handling) that keeps connections open."""
    return type("KeepAliveRequestHandler", (_KeepAlive, base), {"connections": connections})
