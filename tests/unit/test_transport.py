"""``upstream/transport.py`` on its own: one guarded POST over ``httpx.MockTransport`` (no socket), its
failures named as the ladder needs them, and the watchdog's reasons. The timing itself (a watchdog shutting a
real socket mid-read) is held to its bound on real sockets in ``tests/sockets``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from chuixiang.deadline import Deadline
from chuixiang.upstream.failures import (
    AnswerTooLarge,
    Cancelled,
    ConnectFailed,
    ConnectionDropped,
    DeadlineExceeded,
    FirstContentTimeout,
    IdleTimeout,
    StatusError,
)
from chuixiang.upstream.transport import GuardedPost, GuardedRequest
from chuixiang.upstream.watchdog import Cancellation, TextLimits, Watchdog


def _deadline(remaining_ms: float) -> Deadline:
    return Deadline(at=time.monotonic() + remaining_ms / 1000, bound_by="total", budget_ms=remaining_ms)


def _post(
    handler: Callable[[httpx.Request], httpx.Response],
    *,
    deadline: Deadline | None = None,
    max_bytes: int = 1000,
    text: TextLimits | None = None,
    cancellation: Cancellation | None = None,
) -> GuardedPost:
    client = httpx.Client(transport=httpx.MockTransport(handler))
    request = GuardedRequest(
        "https://model.example/v1/chat/completions",
        {"x": 1},
        {},
        deadline or _deadline(60_000),
        read_timeout_s=5.0,
        max_bytes=max_bytes,
        text=text,
        cancellation=cancellation,
    )
    return GuardedPost(client, request)


def _body(*parts: bytes) -> Iterator[bytes]:
    yield from parts


def test_the_body_arrives_in_its_chunks_and_is_counted() -> None:
    with _post(lambda request: httpx.Response(200, content=_body(b"data: a\n\n", b"data: b\n\n"))) as call:
        assert call.status == 200 and call.first_byte_ms is not None
        assert b"".join(call.chunks()) == b"data: a\n\ndata: b\n\n"
        assert call.bytes_received == 18


def test_an_answer_over_the_cap_is_refused_as_it_arrives() -> None:
    post = _post(lambda request: httpx.Response(200, content=_body(b"x" * 600, b"y" * 600)), max_bytes=1000)
    with post as call, pytest.raises(AnswerTooLarge) as raised:
        list(call.chunks())
    assert raised.value.content_started and raised.value.bytes_received == 1200


def test_an_error_answer_is_read_a_little_and_described() -> None:
    answer = httpx.Response(503, json={"error": {"message": "overloaded"}}, headers={"retry-after": "7"})
    with _post(lambda request: answer) as call:
        error = call.status_error()
    assert isinstance(error, StatusError) and error.status == 503


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (httpx.ConnectError("refused"), ConnectFailed),
        (httpx.RemoteProtocolError("closed"), ConnectionDropped),
        (httpx.ReadError("reset"), ConnectionDropped),
        (httpx.ProxyError("bad gateway"), ConnectionDropped),
    ],
)
def test_each_transport_error_before_the_headers_has_its_failure(
    raised: httpx.TransportError, expected: type[Exception]
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise raised

    with pytest.raises(expected, match="before response headers"):
        _post(handler).__enter__()


def test_no_time_left_or_a_cancelled_call_never_starts() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200)

    with pytest.raises(DeadlineExceeded):
        _post(handler, deadline=_deadline(-1)).__enter__()
    cancellation = Cancellation()
    cancellation.cancel("the job no longer runs the recipe stage")
    with pytest.raises(Cancelled, match="not started: the job no longer runs"):
        _post(handler, cancellation=cancellation).__enter__()
    assert sent == []


def test_a_socket_read_timeout_is_named_by_the_limit_it_stood_for() -> None:
    text = TextLimits(first_content_s=1.5, idle_s=1.0)
    with _post(lambda request: httpx.Response(200, content=b""), text=text) as call:
        assert isinstance(call.timeout("mid-answer"), FirstContentTimeout)  # no text yet
        call.text_arrived()
        assert isinstance(call.timeout("mid-answer"), IdleTimeout)
        call.suspend_text_limits()  # one JSON document: only the deadline bounds it
        assert isinstance(call.timeout("mid-answer"), DeadlineExceeded)
    with _post(lambda request: httpx.Response(200, content=b"")) as call:  # a picture: no text limits
        assert isinstance(call.timeout("mid-answer"), IdleTimeout)
        assert "no data for 5000 ms" in str(call.timeout("mid-answer"))


def _fired(dog: Watchdog) -> str | None:
    assert dog.fired.wait(5), "the watchdog never fired"
    dog.cancel()
    return dog.reason


def test_the_watchdog_names_the_limit_that_ran_out() -> None:
    assert _fired(Watchdog(0)) == "deadline"
    assert _fired(Watchdog(60, TextLimits(first_content_s=0, idle_s=60))) == "first_content"
    idle = Watchdog(60, TextLimits(first_content_s=60, idle_s=0))
    idle.text_arrived()
    assert _fired(idle) == "idle"
    cancelled = Watchdog(60, TextLimits(first_content_s=60, idle_s=60))
    cancelled.cancel_call()
    assert _fired(cancelled) == "cancelled"


def test_a_cancellation_reaches_every_call_listening_and_only_once() -> None:
    heard: list[str] = []
    cancellation = Cancellation()
    forget = cancellation.listen(lambda: heard.append("a"))
    cancellation.listen(lambda: heard.append("b"))
    forget()
    cancellation.cancel("stop")
    cancellation.cancel("again")
    assert heard == ["b"] and cancellation.is_set() and cancellation.reason == "stop"
