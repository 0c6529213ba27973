"""Read one OpenAI-compatible chat completion, streamed or not, inside hard limits.

Two limits are separate (seed §3): *idle*, the longest silence before the first
byte and between two reads, enforced by the socket read timeout; and the
attempt's *deadline*, enforced by a :class:`Watchdog` that shuts the socket down
at that instant. Any bytes, SSE comments and keep-alives included, reset the
idle clock - they prove the upstream is alive - while the deadline still holds
no matter how the bytes trickle in.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from .deadline import Deadline
from .upstream import UpstreamFailure, Watchdog, send_post, status_failure

MAX_STREAM_BYTES = 2 * 1024 * 1024
MAX_CONTENT_CHARS = 200_000


@dataclass
class Completion:
    content: str = ""
    reasoning_chars: int = 0
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    http_status: int | None = None
    first_byte_ms: int | None = None
    first_content_ms: int | None = None
    max_gap_ms: int = 0
    last_byte_ms: float | None = None  #: when the last bytes arrived, from the attempt start
    chunks: int = 0
    total_ms: int = 0
    streamed: bool = True
    parts: list[str] = field(default_factory=list, repr=False)


class _Reader:
    """Incremental SSE parser; split out so the benchmark measures exactly this."""

    def __init__(self, max_chunks: int, started: float) -> None:
        self.out = Completion()
        self.max_chunks = max_chunks
        self.started = started
        self.content_chars = 0
        self.done = False
        self._tail = b""

    def feed(self, data: bytes) -> None:
        lines = (self._tail + data).split(b"\n")
        self._tail = lines.pop()
        for line in lines:
            self._line(line)
            if self.done:
                return

    def finish(self) -> None:
        if self._tail and not self.done:
            self._line(self._tail)
        self._tail = b""

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return  # blank line, ":" comment / keep-alive, "event:", "id:", "retry:"
        data = line[5:].strip()
        if data == b"[DONE]":
            self.done = True
            return
        if not data:
            return
        try:
            event = json.loads(data)
        except ValueError:
            raise UpstreamFailure("stream_error", f"undecodable SSE data: {data[:120]!r}",
                                  content_started=self.content_chars > 0) from None
        self.event(event)

    def event(self, event: Any) -> None:
        out = self.out
        if not isinstance(event, dict):
            return
        if event.get("error"):
            detail = json.dumps(event["error"], ensure_ascii=False)[:300]
            raise UpstreamFailure("stream_error", f"error in stream: {detail}", content_started=self.content_chars > 0)
        out.chunks += 1
        if out.chunks > self.max_chunks:
            raise UpstreamFailure("cap", f"more than {self.max_chunks} chunks", content_started=True)
        if event.get("usage"):
            out.usage = event["usage"]
        choices = event.get("choices")
        if not choices:
            return
        choice = choices[0]
        delta = choice.get("delta") or choice.get("message") or {}
        text = delta.get("content")
        if text:
            if out.first_content_ms is None:
                out.first_content_ms = int((time.monotonic() - self.started) * 1000)
            out.parts.append(text)
            self.content_chars += len(text)
            if self.content_chars > MAX_CONTENT_CHARS:
                raise UpstreamFailure("cap", f"content over {MAX_CONTENT_CHARS} characters", content_started=True)
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            out.reasoning_chars += len(reasoning)
        if choice.get("finish_reason"):
            out.finish_reason = choice["finish_reason"]


def read_chat_completion(
    client: httpx.Client,
    url: str,
    payload: dict[str, Any],
    headers: dict[str, str],
    *,
    idle_s: float,
    deadline: Deadline,
    max_chunks: int,
    max_bytes: int = MAX_STREAM_BYTES,
) -> Completion:
    """POST ``payload`` and read the answer; raise :class:`UpstreamFailure` on any failure."""
    started = time.monotonic()
    remaining_s = deadline.remaining_ms() / 1000
    if remaining_s <= 0:
        raise UpstreamFailure("timeout", "no time left before the attempt started")
    first_wait = min(idle_s, remaining_s)
    timeout = httpx.Timeout(first_wait, connect=min(first_wait, 10.0))
    watchdog = Watchdog(remaining_s)
    reader = _Reader(max_chunks, started)
    out = reader.out
    received = 0
    last = started
    try:
        response = send_post(client, url, payload, headers, timeout, watchdog,
                             lambda: _timeout(watchdog, deadline, idle_s, "before response headers"))
        try:
            out.http_status = response.status_code
            out.first_byte_ms = int((time.monotonic() - started) * 1000)
            last = time.monotonic()
            if response.status_code != 200:
                body = b""
                try:
                    for data in response.iter_bytes():
                        body += data
                        if len(body) > 4096:
                            break
                except httpx.HTTPError:
                    pass
                raise status_failure(response, body)
            ctype = response.headers.get("content-type", "")
            out.streamed = "text/event-stream" in ctype
            body_parts: list[bytes] = []
            try:
                for data in response.iter_bytes():
                    now = time.monotonic()
                    out.max_gap_ms = max(out.max_gap_ms, int((now - last) * 1000))
                    out.last_byte_ms = (now - started) * 1000
                    last = now
                    received += len(data)
                    if received > max_bytes:
                        raise UpstreamFailure("cap", f"answer over {max_bytes} bytes",
                                              content_started=True)
                    if out.streamed:
                        reader.feed(data)
                        if reader.done:
                            break
                    else:
                        body_parts.append(data)
            except httpx.TimeoutException:
                raise _timeout(watchdog, deadline, idle_s, "mid-stream",
                               content_started=reader.content_chars > 0) from None
            except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
                if watchdog.fired.is_set():
                    raise _timeout(watchdog, deadline, idle_s, "mid-stream", content_started=True) from None
                raise UpstreamFailure(
                    "reset",
                    f"connection dropped after {received} bytes: {exc}",
                    transient=received == 0,
                    content_started=received > 0,
                ) from None
            if watchdog.fired.is_set():
                raise _timeout(watchdog, deadline, idle_s, "mid-stream", content_started=True)
            if out.streamed:
                reader.finish()
            else:
                _parse_plain(reader, b"".join(body_parts))
        finally:
            response.close()
    except UpstreamFailure as failure:
        failure.partial = out
        raise
    finally:
        watchdog.cancel()
        out.total_ms = int((time.monotonic() - started) * 1000)
    out.content = "".join(out.parts)
    return out


def _parse_plain(reader: _Reader, body: bytes) -> None:
    """An upstream that ignored ``stream: true`` and answered one JSON document."""
    try:
        doc = json.loads(body)
    except ValueError:
        raise UpstreamFailure("invalid", f"non-stream answer is not JSON: {body[:120]!r}") from None
    reader.event(doc)


def _timeout(
    watchdog: Watchdog,
    deadline: Deadline,
    idle_s: float,
    where: str,
    content_started: bool = False,
) -> UpstreamFailure:
    if watchdog.fired.is_set():
        detail = f"deadline ({deadline.bound_by}, {deadline.budget_ms:.0f} ms) reached {where}"
    else:
        detail = f"no data for {idle_s * 1000:.0f} ms {where}"
    return UpstreamFailure("timeout", detail, content_started=content_started)
