"""What ends a call on time: a :class:`Watchdog` that shuts the socket down when the first limit that applies
runs out (the deadline; with :class:`TextLimits`, the first text and the gap between texts), and a
:class:`Cancellation` that ends every call listening to it at once."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx


class Cancellation:
    """Set, from any thread, when the answer is no longer wanted: each call in flight that registered shuts
    its socket at once (its reader wakes with :class:`Cancelled`), and a call not yet started does not start."""

    def __init__(self) -> None:
        self._set = threading.Event()
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []
        self.reason = ""

    def cancel(self, reason: str) -> None:
        with self._lock:
            if self._set.is_set():
                return
            self.reason = reason
            self._set.set()
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def is_set(self) -> bool:
        return self._set.is_set()

    def listen(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` on :meth:`cancel` (at once if already cancelled); returns the way to stop listening."""
        with self._lock:
            if not self._set.is_set():
                self._listeners.append(listener)
                return lambda: self._forget(listener)
        listener()
        return lambda: None

    def _forget(self, listener: Callable[[], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)


@dataclass(frozen=True)
class TextLimits:
    """Limits measured on what the model *writes*, not on bytes: keep-alives do not reset them."""

    first_content_s: float  #: request → first text
    idle_s: float  #: between two texts


class Watchdog:
    """Shuts a response's socket down when the first limit that applies runs out, even mid-read.

    The attempt's deadline always applies; with :class:`TextLimits`, so do the
    first-content limit (until the first text) and the idle limit (after each text,
    re-armed by :meth:`text_arrived`). A socket read timeout could not enforce either:
    a slow drip or an SSE keep-alive resets it. ``shutdown()`` wakes a thread blocked
    in ``recv`` at once, which ``close()`` does not guarantee on Linux.
    """

    def __init__(self, remaining_s: float, text: TextLimits | None = None) -> None:
        now = time.monotonic()
        self.fired = threading.Event()
        self.reason: str | None = None  #: "deadline", "first_content" or "idle" once fired
        self.text_seen = False
        self._deadline_at = now + max(0.0, remaining_s)
        self._idle_s = text.idle_s if text else None
        self._text_at = now + text.first_content_s if text else None
        self._suspended_text_at: float | None = None
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._cancelled = False
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watchdog", daemon=True)
        self._thread.start()

    def text_arrived(self) -> None:
        """The model wrote something: the idle limit starts again (a float store: cheap per chunk).

        Only the first text can move the due time earlier (first-content → idle); later
        ones move it later, so the thread is woken only then."""
        if self._idle_s is not None and self._suspended_text_at is None:
            self._text_at = time.monotonic() + self._idle_s
            if not self.text_seen:
                self.text_seen = True
                self._wake.set()

    def suspend_text(self) -> None:
        """Only the deadline applies until :meth:`resume_text` (a body that may be one JSON document)."""
        with self._lock:
            if self._idle_s is not None and self._suspended_text_at is None:
                self._suspended_text_at, self._text_at = self._text_at, None

    def resume_text(self) -> None:
        """The text limits apply again, from where they stood (an overdue first content fires at once)."""
        with self._lock:
            if self._suspended_text_at is not None:
                self._text_at, self._suspended_text_at = self._suspended_text_at, None
                self._wake.set()

    def _run(self) -> None:
        while not self._cancelled:
            text_at = self._text_at
            due = self._deadline_at if text_at is None else min(self._deadline_at, text_at)
            wait = due - time.monotonic()
            if wait <= 0:
                if text_at is None or self._deadline_at <= text_at:
                    self._fire("deadline")
                else:
                    self._fire("idle" if self.text_seen else "first_content")
                return
            if self._wake.wait(wait):
                if self._cancelled:
                    return
                self._wake.clear()

    def cancel_call(self) -> None:
        """Nobody will read the answer: shut the socket now (the reader sees :class:`Cancelled`)."""
        self._fire("cancelled")

    def attach(self, response: httpx.Response) -> None:
        stream: Any = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        with self._lock:
            self._sock = sock
            if self.fired.is_set():
                self._shutdown()

    def _fire(self, reason: str) -> None:
        with self._lock:
            if self.fired.is_set():
                return
            self.reason = reason
            self.fired.set()
            self._shutdown()

    def _shutdown(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._cancelled = True
        self._wake.set()
