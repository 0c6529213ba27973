"""Read one OpenAI-compatible chat completion, streamed or not, inside hard limits.

Three limits hold on a stream, all enforced by the transport's watchdog on the
socket: the wait for the *first text* (content or reasoning), the *idle* gap
between two texts, and the attempt's *deadline*. They are measured on what the
model writes, as the Vercel AI SDK (``firstChunkMs`` / ``chunkMs``) and LangChain
(``stream_chunk_timeout``) do: SSE comments (a gateway's ``: PROCESSING`` while a
request is queued), empty deltas and role-only chunks prove the connection is
alive, not that the model is writing, so they reset nothing. A silent socket is
caught at the same limits.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..deadline import Deadline
from ..redaction import redact
from .failures import AnswerTooLarge, InvalidAnswer, StreamError, UpstreamError
from .transport import GuardedPost, TextLimits

MAX_STREAM_BYTES = 2 * 1024 * 1024
MAX_CONTENT_CHARS = 200_000


@dataclass(frozen=True)
class StreamLimits:
    """The limits of one streamed chat call (the deadline comes per attempt from the budget)."""

    first_content_s: float
    idle_s: float
    max_chunks: int
    max_bytes: int = MAX_STREAM_BYTES
    max_content_chars: int = MAX_CONTENT_CHARS


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


class SSEReader:
    """Incremental SSE parser; split out so the benchmark measures exactly this."""

    def __init__(self, limits: StreamLimits, started: float, on_text: Callable[[], None] | None = None) -> None:
        self.out = Completion()
        self.limits = limits
        self.on_text = on_text
        self.started = started
        self.content_chars = 0
        self.first_text_at: float | None = None  #: monotonic time of the first text (content or reasoning)
        self.done = False
        self._tail = b""

    # What a progress reporter reads from another thread (plain attribute reads; nothing is locked).

    @property
    def reasoning_chars(self) -> int:
        return self.out.reasoning_chars

    @property
    def completion_tokens(self) -> int | None:
        """Tokens written so far, when the provider reports usage while streaming."""
        usage = self.out.usage
        tokens = usage.get("completion_tokens") if usage else None
        return tokens if isinstance(tokens, int) else None

    def text_so_far(self) -> str:
        return "".join(list(self.out.parts))

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
            raise StreamError(f"undecodable SSE data: {data[:120]!r}",
                              content_started=self.content_chars > 0) from None
        self.event(event)

    def event(self, event: Any) -> None:
        out = self.out
        if not isinstance(event, dict):
            return
        if event.get("error"):
            detail = redact(json.dumps(event["error"], ensure_ascii=False)[:300])
            raise StreamError(f"error in stream: {detail}", content_started=self.content_chars > 0)
        out.chunks += 1
        if out.chunks > self.limits.max_chunks:
            raise AnswerTooLarge(f"more than {self.limits.max_chunks} chunks", content_started=True)
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
            if self.content_chars > self.limits.max_content_chars:
                raise AnswerTooLarge(f"content over {self.limits.max_content_chars} characters",
                                     content_started=True)
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            out.reasoning_chars += len(reasoning)
        if text or reasoning:
            if self.first_text_at is None:
                self.first_text_at = time.monotonic()
            if self.on_text is not None:
                self.on_text()
        if choice.get("finish_reason"):
            out.finish_reason = choice["finish_reason"]


def read_chat_completion(client: httpx.Client, url: str, payload: dict[str, Any], headers: dict[str, str], *,
                         limits: StreamLimits, deadline: Deadline,
                         watch: Callable[[SSEReader], None] | None = None) -> Completion:
    """POST ``payload`` and read the answer; raise an :class:`UpstreamError` on any failure.

    ``watch`` receives the reader before the request is sent (a progress reporter reads it).
    """
    started = time.monotonic()
    text = TextLimits(first_content_s=limits.first_content_s, idle_s=limits.idle_s)
    # The socket's own read timeout only backs the watchdog up (the idle limit sits inside the first-content one).
    post = GuardedPost(client, url, payload, headers, deadline=deadline, read_timeout_s=limits.first_content_s,
                       max_bytes=limits.max_bytes, text=text)
    reader = SSEReader(limits, started, on_text=post.text_arrived)
    if watch is not None:
        watch(reader)
    out = reader.out
    try:
        with post as call:
            out.http_status = call.status
            out.first_byte_ms = call.first_byte_ms
            if call.status != 200:
                raise call.status_error()
            out.streamed = "text/event-stream" in call.response.headers.get("content-type", "")
            body_parts: list[bytes] = []
            last = time.monotonic()
            for data in call.chunks():
                now = time.monotonic()
                out.max_gap_ms = max(out.max_gap_ms, int((now - last) * 1000))
                out.last_byte_ms = (now - started) * 1000
                last = now
                if out.streamed:
                    reader.feed(data)
                    if reader.done:
                        break
                else:
                    body_parts.append(data)
            if out.streamed:
                reader.finish()
            else:
                _parse_plain(reader, b"".join(body_parts))
    except UpstreamError as failure:
        failure.content_started = failure.content_started or reader.content_chars > 0
        failure.measured = out
        raise
    finally:
        out.total_ms = int((time.monotonic() - started) * 1000)
    out.content = "".join(out.parts)
    return out


def _parse_plain(reader: SSEReader, body: bytes) -> None:
    """An upstream that ignored ``stream: true`` and answered one JSON document."""
    try:
        doc = json.loads(body)
    except ValueError:
        raise InvalidAnswer(f"non-stream answer is not JSON: {body[:120]!r}") from None
    reader.event(doc)
