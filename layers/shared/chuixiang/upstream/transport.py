"""One deadline-guarded POST, shared by the chat and the image call.

The *deadline* bounds the whole call, however the bytes trickle in: a
:class:`Watchdog` shuts the socket down at that instant, which wakes a thread
blocked in ``recv`` at once. With :class:`TextLimits` (the chat stream) the same
watchdog also enforces the wait for the model's first text and the gap between
two texts. The socket's own *read timeout* bounds each silence on the wire (before
the response headers, and as a backstop between reads). Everything that can go
wrong on the wire is raised as an :class:`~chuixiang.upstream.failures.UpstreamError`
subclass.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx

from ..deadline import Deadline
from .failures import (
    AnswerTooLarge,
    Cancelled,
    ConnectFailed,
    ConnectionDropped,
    DeadlineExceeded,
    FirstContentTimeout,
    IdleTimeout,
    StatusError,
    UpstreamError,
    UpstreamTimeout,
)
from .watchdog import Cancellation, TextLimits, Watchdog

__all__ = ["GuardedPost", "GuardedRequest"]

#: How each transport error the body or the headers can raise becomes an upstream failure (timeouts apart:
#: which limit fired decides their kind, see :meth:`GuardedPost.failure_from`). The first match wins.
TRANSPORT_FAILURES: dict[type[httpx.TransportError], tuple[type[UpstreamError], str]] = {
    httpx.ConnectError: (ConnectFailed, "connect failed"),  # refused, unreachable, TLS: the upstream did no work
    httpx.RemoteProtocolError: (ConnectionDropped, "connection dropped"),  # closed or reset mid-message
    httpx.ReadError: (ConnectionDropped, "connection dropped"),
    httpx.WriteError: (ConnectionDropped, "connection dropped"),
    # anything else on the wire (a proxy's error, an unsupported protocol)
    httpx.TransportError: (ConnectionDropped, "transport failed"),
}
TRANSPORT_ERRORS = (httpx.TransportError,)

#: A connection that is not up within this long will not be (a loopback or a regional endpoint).
CONNECT_TIMEOUT_S = 10.0
#: How much of an error answer's body is kept for the detail.
ERROR_BODY_BYTES = 4096


@dataclass(frozen=True)
class GuardedRequest:
    """One guarded HTTP call: where, what, and its limits.

    ``read_timeout_s`` bounds each silence on the socket; ``deadline`` the whole call; ``text`` (optional) the
    wait for the model's first text and the gaps between texts; ``max_bytes`` the body; ``cancellation``
    (optional) closes it at once when set. ``method="GET"`` with no payload fetches an image a model answered
    with a URL."""

    url: str
    payload: dict[str, Any] | None
    headers: dict[str, str]
    deadline: Deadline
    read_timeout_s: float
    max_bytes: int
    text: TextLimits | None = None
    method: str = "POST"
    cancellation: Cancellation | None = None


class GuardedPost:
    """``with GuardedPost(client, request) as call:`` sends the request (:class:`GuardedRequest`);
    ``call.chunks()`` reads the body. The response is closed and the watchdog cancelled on exit."""

    def __init__(self, client: httpx.Client, request: GuardedRequest) -> None:
        self.client = client
        self.method = request.method
        self.url = request.url
        self.payload = request.payload
        self.headers = request.headers
        self.deadline = request.deadline
        self.read_timeout_s = request.read_timeout_s
        self.max_bytes = request.max_bytes
        self.text = request.text
        self.cancellation = request.cancellation
        self._unlisten: Callable[[], None] = lambda: None
        self.started = time.monotonic()
        self.bytes_received = 0
        self.status: int | None = None
        self.first_byte_ms: int | None = None  #: response headers, from the call start
        self._response: httpx.Response | None = None
        self._watchdog: Watchdog | None = None
        self._first_wait_is_deadline = False

    @property
    def response(self) -> httpx.Response:
        if self._response is None:
            raise RuntimeError("use GuardedPost as a context manager")
        return self._response

    def __enter__(self) -> GuardedPost:
        remaining_s = self.deadline.remaining_ms() / 1000
        if remaining_s <= 0:
            raise DeadlineExceeded("no time left before the call started")
        if self.cancellation is not None and self.cancellation.is_set():
            raise Cancelled(f"not started: {self.cancellation.reason}")
        first_wait = min(self.read_timeout_s, remaining_s)
        timeout = httpx.Timeout(first_wait, connect=min(first_wait, CONNECT_TIMEOUT_S))
        self._first_wait_is_deadline = first_wait >= remaining_s
        self._watchdog = Watchdog(remaining_s, self.text)
        if self.cancellation is not None:
            self._unlisten = self.cancellation.listen(self._watchdog.cancel_call)
        request = self.client.build_request(
            self.method, self.url, json=self.payload, headers=self.headers, timeout=timeout
        )
        try:
            self._response = self.client.send(request, stream=True)
        except TRANSPORT_ERRORS as exc:
            self._watchdog.cancel()
            raise self.failure_from(exc, "before response headers") from exc
        self._watchdog.attach(self._response)
        self.status = self._response.status_code
        self.first_byte_ms = int((time.monotonic() - self.started) * 1000)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._unlisten()
        if self._response is not None:
            self._response.close()
        if self._watchdog is not None:
            self._watchdog.cancel()

    def text_arrived(self) -> None:
        """Tell the watchdog the model wrote text (re-arms the idle limit)."""
        if self._watchdog is not None:
            self._watchdog.text_arrived()

    def suspend_text_limits(self) -> None:
        """The body may be one JSON document (a provider that ignored ``stream: true``): until
        :meth:`resume_text_limits`, only the deadline bounds it, on the watchdog and on the socket."""
        if self._watchdog is not None:
            self._watchdog.suspend_text()
        # httpx reads the "timeout" request extension when the body starts to be read.
        timeout = self.response.request.extensions.get("timeout")
        if isinstance(timeout, dict):
            self.response.request.extensions["timeout"] = {
                **timeout,
                "read": max(0.001, self.deadline.remaining_ms() / 1000),
            }
        self._first_wait_is_deadline = True

    def resume_text_limits(self) -> None:
        if self._watchdog is not None:
            self._watchdog.resume_text()

    def failure_from(self, exc: httpx.TransportError, where: str) -> UpstreamError:
        """The one translation of a transport error: a limit that fired (the watchdog shut the socket, or
        the socket's read timeout) is that limit's timeout; anything else is looked up in
        :data:`TRANSPORT_FAILURES`. Raise the result ``from exc``."""
        fired = self._watchdog is not None and self._watchdog.fired.is_set()
        if fired or isinstance(exc, httpx.TimeoutException):
            return self.timeout(where, bytes_received=self.bytes_received)
        failure, what = next(entry for cls, entry in TRANSPORT_FAILURES.items() if isinstance(exc, cls))
        return failure(f"{what} {where}: {exc}", bytes_received=self.bytes_received)

    def timeout(self, where: str, **kw: Any) -> UpstreamTimeout | Cancelled:
        """The limit that ended the call: the watchdog's reason if it fired, else the socket read timeout's."""
        dog = self._watchdog
        reason = dog.reason if dog is not None and dog.fired.is_set() else None
        if reason is None:  # the socket read timeout
            if self._first_wait_is_deadline:
                reason = "deadline"
            elif self.text is not None:
                reason = "idle" if dog is not None and dog.text_seen else "first_content"
            else:
                reason = "read"
        d = self.deadline
        if reason == "cancelled":
            why = self.cancellation.reason if self.cancellation is not None else "cancelled"
            return Cancelled(f"closed {where}: {why}", **kw)
        if reason == "deadline":
            return DeadlineExceeded(f"deadline ({d.bound_by}, {d.budget_ms:.0f} ms) reached {where}", **kw)
        if reason == "first_content" and self.text is not None:
            return FirstContentTimeout(f"no text within {self.text.first_content_s * 1000:.0f} ms {where}", **kw)
        if reason == "idle" and self.text is not None:
            return IdleTimeout(f"no text for {self.text.idle_s * 1000:.0f} ms {where}", **kw)
        return IdleTimeout(f"no data for {self.read_timeout_s * 1000:.0f} ms {where}", **kw)

    def status_error(self) -> StatusError:
        """Read a little of an error answer and describe it."""
        body = bytearray()
        try:
            for data in self.response.iter_bytes():
                body += data
                if len(body) > ERROR_BODY_BYTES:
                    break
        except httpx.HTTPError:
            pass
        return StatusError.from_response(self.response, bytes(body))

    def chunks(self) -> Iterator[bytes]:
        """The body as it arrives; silences, drops, the deadline and the size cap are raised as failures."""
        try:
            for data in self.response.iter_bytes():
                self.bytes_received += len(data)
                if self.bytes_received > self.max_bytes:
                    raise AnswerTooLarge(
                        f"answer over {self.max_bytes} bytes", content_started=True, bytes_received=self.bytes_received
                    )
                yield data
        except TRANSPORT_ERRORS as exc:
            raise self.failure_from(exc, f"after {self.bytes_received} bytes") from exc
        if self._watchdog is not None and self._watchdog.fired.is_set():
            raise self.timeout("mid-answer", bytes_received=self.bytes_received)
