"""uvicorn's HTTP/1.1 protocol, answering a request it cannot parse in the API's one error shape.

A request line or headers h11 refuses (garbage, a header over the limit, a bad ``Content-Length``) never
reaches the ASGI app: uvicorn answers it itself with ``400 Invalid HTTP request received.`` in plain
text. API Gateway answers those too, but a client of this API should only ever have to read
``{"error": {"code", "message", "reason"}}``; so the one method that writes that answer is overridden
here (a subclass passed as uvicorn's ``http`` protocol, not a patch of uvicorn's module), and its
drift test (``tests/runner/test_patches.py``) fails if uvicorn changes it or its caller.
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from chuixiang.api_gate import error_body
from chuixiang.errors import HttpErrorCode
from chuixiang_local.cloud.moto_patches import Patch


class JsonErrorH11Protocol(H11Protocol):
    #: A connection that has not sent a whole request line and headers by then is answered 408 and closed
    #: (a slowloris holds a connection open by sending headers a byte at a time; uvicorn has no such limit).
    #: ``serve`` sets it from ``--body-idle-seconds``.
    header_timeout_s = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _headers_too_slow(self) -> None:
        """Still no request after the limit (h11 waits for the rest of the request line or headers): a 408 in
        the API's error shape, written as bytes (h11 sends no response before it has read a request)."""
        if self.cycle is not None or self.conn.their_state is not h11.IDLE or self.transport.is_closing():
            return
        body = error_body(
            HttpErrorCode.BAD_REQUEST, f"no complete request line and headers within {self.header_timeout_s:g} s"
        ).encode()
        self.transport.write(
            b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
        )
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._header_timer.cancel()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        body = error_body(HttpErrorCode.BAD_REQUEST, f"the HTTP request could not be parsed: {msg}").encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        for event in (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event) or b"")
        self.transport.close()


PATCHES = (
    Patch(
        "uvicorn-400",
        "a request uvicorn cannot parse is answered in the API's error shape (a subclass)",
        {
            "uvicorn.protocols.http.h11_impl:H11Protocol.send_400_response": "322c6ac4bde7e0c7",
            "uvicorn.protocols.http.h11_impl:H11Protocol.handle_events": "1fba7774f4201d2e",
        },
        None,
    ),
    Patch(
        "uvicorn-header-timeout",
        "a connection without whole request headers in time gets a 408 (a subclass)",
        {
            "uvicorn.protocols.http.h11_impl:H11Protocol.connection_made": "ba1915817ccf6c1b",
            "uvicorn.protocols.http.h11_impl:H11Protocol.connection_lost": "4401bc3dceba5dc7",
        },
        None,
    ),
)
