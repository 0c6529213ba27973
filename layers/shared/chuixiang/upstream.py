"""Failures of an upstream HTTP call and the one retry rule both stages follow.

A failure is *transient* only when the upstream plainly did not do the work:
the connection was refused or reset before any byte of an answer, or it
answered 5xx / 429. Timeouts are never transient here: an attempt that used its
whole limit leaves no room for another (seed: "晚失败的不重试").
"""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from .clock import now_utc


@dataclass
class UpstreamFailure(Exception):
    kind: str  #: "connect", "reset", "status", "timeout", "stream_error", "invalid", "empty", "cap"
    detail: str
    transient: bool = False
    content_started: bool = False
    status: int | None = None
    retry_after_s: float | None = None
    #: What was measured before the failure (a ``Completion`` for chat calls).
    partial: Any = None

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - now_utc()).total_seconds())
    except (TypeError, ValueError):
        return None


def status_failure(response: httpx.Response, body: bytes) -> UpstreamFailure:
    status = response.status_code
    snippet = body[:300].decode("utf-8", "replace")
    return UpstreamFailure(
        kind="status",
        detail=f"HTTP {status}: {snippet}",
        transient=status >= 500 or status == 429,
        status=status,
        retry_after_s=retry_after_seconds(response.headers.get("retry-after")),
    )


def backoff_s(attempt: int, base_s: float, cap_s: float) -> float:
    """Full-jitter exponential back-off (AWS Architecture Blog): uniform in [0, base·2^n]."""
    return random.uniform(0, min(cap_s, base_s * 2 ** (attempt - 1)))


@dataclass
class RetryDecision:
    retry: bool
    wait_s: float
    reason: str


def decide_retry(
    failure: UpstreamFailure,
    *,
    attempt: int,
    max_attempts: int,
    elapsed_ms: float,
    window_ms: float,
    remaining_ms: float,
    needed_ms: float,
    base_backoff_s: float,
) -> RetryDecision:
    """Retry only early, transient failures before any content, when time allows."""
    if not failure.transient:
        return RetryDecision(False, 0, f"{failure.kind} is not transient")
    if failure.content_started:
        return RetryDecision(False, 0, "content had already started")
    if elapsed_ms > window_ms:
        return RetryDecision(False, 0, f"failed after {elapsed_ms:.0f} ms > window {window_ms:.0f} ms")
    if attempt >= max_attempts:
        return RetryDecision(False, 0, f"attempt {attempt} of {max_attempts}")
    wait = backoff_s(attempt, base_backoff_s, cap_s=base_backoff_s * 4)
    if failure.retry_after_s is not None:
        wait = max(wait, failure.retry_after_s)
    if remaining_ms - wait * 1000 < needed_ms:
        return RetryDecision(
            False, 0, f"{remaining_ms:.0f} ms left cannot hold wait {wait:.2f} s + {needed_ms:.0f} ms"
        )
    return RetryDecision(True, wait, "early transient failure")


class Watchdog:
    """Closes a response's socket at an absolute deadline, even in the middle of a read.

    A socket read timeout only bounds the *gap* between bytes; a slow drip would
    outlive any total limit. ``shutdown()`` wakes a thread blocked in ``recv`` at
    once, which ``close()`` does not guarantee on Linux.
    """

    def __init__(self, remaining_s: float) -> None:
        self.fired = threading.Event()
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, remaining_s), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def attach(self, response: httpx.Response) -> None:
        stream: Any = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        with self._lock:
            self._sock = sock
            if self.fired.is_set():
                self._shutdown()

    def _fire(self) -> None:
        with self._lock:
            self.fired.set()
            self._shutdown()

    def _shutdown(self) -> None:
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cancel(self) -> None:
        self._timer.cancel()


def send_post(
    client: httpx.Client,
    url: str,
    payload: dict[str, Any],
    headers: dict[str, str],
    timeout: httpx.Timeout,
    watchdog: Watchdog,
    on_timeout: Callable[[], UpstreamFailure],
) -> httpx.Response:
    """Send a streaming POST and classify what can go wrong before the response headers.

    A refused connection or one dropped before any answer is transient (the upstream
    did no work); a silence is a timeout. The watchdog is attached to the response.
    """
    request = client.build_request("POST", url, json=payload, headers=headers, timeout=timeout)
    try:
        response = client.send(request, stream=True)
    except httpx.ConnectError as exc:
        raise UpstreamFailure("connect", f"connect failed: {exc}", transient=True) from None
    except httpx.TimeoutException:
        raise on_timeout() from None
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        if watchdog.fired.is_set():
            raise on_timeout() from None
        raise UpstreamFailure("reset", f"connection dropped before headers: {exc}", transient=True) from None
    watchdog.attach(response)
    return response
