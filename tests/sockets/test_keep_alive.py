"""The moto server's keep-alive handler: connections are reused, every answer is framed, and
stopping hangs up on idle connections."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from chuixiang_local.cloud.keep_alive import OpenConnections, keep_alive_handler
from chuixiang_local.servers import stop_server


def echo(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """Answers with the method, the path and the body it read; ``/fail`` raises, ``/stream`` has no length."""
    body = environ["wsgi.input"].read()
    path = environ["PATH_INFO"]
    if path == "/fail":
        raise RuntimeError("boom")
    answer = f"{environ['REQUEST_METHOD']} {path} {body.decode()}".encode()
    if path == "/stream":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [answer[:3], answer[3:]]
    if path == "/empty":
        start_response("204 No Content", [])
        return []
    start_response(
        "200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(answer))), ("Connection", "close")]
    )  # the handler frames the answer, not the app
    return [answer]


@pytest.fixture
def server() -> Iterator[tuple[BaseWSGIServer, OpenConnections]]:
    connections = OpenConnections()
    srv = make_server(
        "127.0.0.1", 0, echo, threaded=True, request_handler=keep_alive_handler(WSGIRequestHandler, connections)
    )
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv, connections
    stop_server(srv)
    connections.close_all()
    thread.join()


def _connect(srv: BaseWSGIServer) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=5)


def _raw(srv: BaseWSGIServer, request: bytes) -> bytes:
    """Send bytes no HTTP client would; everything the server answers until it hangs up."""
    with socket.create_connection(("127.0.0.1", srv.server_address[1]), timeout=5) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def test_one_connection_carries_many_requests(server: tuple[BaseWSGIServer, OpenConnections]) -> None:
    srv, _ = server
    conn = _connect(srv)
    for i in range(5):
        conn.request("POST", f"/item/{i}", body=f"body-{i}")
        answer = conn.getresponse()
        assert answer.read() == f"POST /item/{i} body-{i}".encode()
        assert answer.getheader("Connection") is None
        assert answer.getheader("Content-Length") == str(len(f"POST /item/{i} body-{i}"))
        if i == 0:
            sock = conn.sock
        assert conn.sock is sock  # the same socket: the server kept it open
    conn.close()


def test_answers_without_a_length_or_a_body_are_framed(server: tuple[BaseWSGIServer, OpenConnections]) -> None:
    srv, _ = server
    conn = _connect(srv)
    conn.request("GET", "/stream")
    assert conn.getresponse().read() == b"GET /stream "
    conn.request("HEAD", "/item/1")
    head = conn.getresponse()
    assert head.read() == b"" and head.getheader("Content-Length") == str(len("HEAD /item/1 "))
    conn.request("DELETE", "/empty")
    empty = conn.getresponse()
    assert empty.status == 204 and empty.read() == b""
    conn.request("GET", "/item/last")  # the connection is still in step after all three
    assert conn.getresponse().read() == b"GET /item/last "
    conn.close()


def test_pipelined_requests_are_each_answered(server: tuple[BaseWSGIServer, OpenConnections]) -> None:
    # Two requests in one write: the first body must be read exactly, not past it.
    srv, _ = server
    data = _raw(
        srv,
        b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
        b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nde",
    )
    assert b"POST /a abc" in data and b"POST /b de" in data
    assert data.count(b"HTTP/1.1 200") == 2 and data.endswith(b"POST /b de")


def test_a_chunked_body_is_read_and_that_connection_closed(server: tuple[BaseWSGIServer, OpenConnections]) -> None:
    srv, _ = server
    conn = _connect(srv)
    conn.request(
        "PUT", "/chunked", body=iter([b"ab", b"cd"]), encode_chunked=True, headers={"Transfer-Encoding": "chunked"}
    )
    answer = conn.getresponse()
    assert answer.read() == b"PUT /chunked abcd"
    assert "close" in answer.getheader("Connection", "")
    conn.close()


def test_a_failing_app_gets_a_500_and_the_connection_closed(server: tuple[BaseWSGIServer, OpenConnections]) -> None:
    srv, _ = server
    conn = _connect(srv)
    conn.request("GET", "/fail")
    answer = conn.getresponse()
    assert answer.status == 500 and answer.getheader("Connection") == "close"
    answer.read()
    conn.close()


@pytest.mark.parametrize(
    "raw",
    [
        b"GET / HTTP/1.1\r\n folded: header\r\n\r\n",
        b"GET / HTTP/1.1\r\nno colon here\r\n\r\n",
        b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(101)) + b"\r\n",
        b"GET / HTTP/1.1\r\nX-Long: " + b"y" * 70000 + b"\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: ten\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
    ],
)
def test_malformed_headers_get_a_4xx_and_the_connection_closed(
    server: tuple[BaseWSGIServer, OpenConnections], raw: bytes
) -> None:
    srv, _ = server
    data = _raw(srv, raw)
    status = int(data.split(b" ", 2)[1])
    assert 400 <= status < 500, data[:200]


def test_parsed_headers_are_what_http_server_would_give(server: tuple[BaseWSGIServer, OpenConnections]) -> None:
    seen: list[Any] = []
    srv, _ = server

    def record(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append(environ)
        start_response("200 OK", [])
        return [b""]

    srv.app = record
    conn = _connect(srv)
    conn.request(
        "POST",
        "//double/slash",
        body=b"{}",
        headers={
            "X-Amz-Target": "DynamoDB_20120810.GetItem",
            "X-Spaced": "  value with trailing space ",
            "X-Twice": "1",
        },
    )
    conn.getresponse().read()
    conn.close()
    environ = seen[0]
    assert environ["PATH_INFO"] == "/double/slash"
    assert environ["HTTP_X_AMZ_TARGET"] == "DynamoDB_20120810.GetItem"
    assert environ["HTTP_X_SPACED"] == "value with trailing space "
    assert environ["CONTENT_LENGTH"] == "2"


def test_stopping_hangs_up_on_idle_connections(server: tuple[BaseWSGIServer, OpenConnections]) -> None:
    srv, connections = server
    conn = _connect(srv)
    conn.request("GET", "/item/1")
    conn.getresponse().read()
    handlers = [t for t in threading.enumerate() if "process_request_thread" in t.name]
    assert handlers  # the connection's thread, waiting for a next request
    connections.close_all()
    assert conn.sock is not None and conn.sock.recv(1) == b""  # the server hung up
    for thread in handlers:
        thread.join(timeout=5)
    assert not any(t.is_alive() for t in handlers)
    conn.close()
