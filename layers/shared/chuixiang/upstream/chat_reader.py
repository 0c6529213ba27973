"""The reader of one chat answer, streamed or not: events framed and parsed as they arrive, text and reasoning
counted (what the watchdog's text limits measure), usage and errors kept, the answer's limits enforced.
:func:`~.chat.read_chat_completion` feeds it the body."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..redaction import key_echoed, redact
from .chat_events import (
    error_in,
    first_candidate,
    snippet,
    texts_of,
    token_count,
    usage_of,
)
from .failures import AnswerTooLarge, ConnectionDropped, InvalidAnswer, StreamError
from .sse import BOM, SSEFramer

MAX_STREAM_BYTES = 2 * 1024 * 1024
MAX_CONTENT_CHARS = 200_000
#: How much of a body that turned out to be no event stream is kept for the failure's detail.
HEAD_BYTES = 200


@dataclass(frozen=True)
class StreamLimits:
    """The limits of one streamed chat call (the deadline comes per attempt from the budget)."""

    first_content_s: float
    idle_s: float
    max_chunks: int
    max_bytes: int = MAX_STREAM_BYTES
    max_content_chars: int = MAX_CONTENT_CHARS


@dataclass
class StreamTally:
    """What the reader has counted so far (written by the reader's thread only; a progress reporter reads it)."""

    parts: list[str] = field(default_factory=list, repr=False)
    content_chars: int = 0
    reasoning_chars: int = 0
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    first_content_ms: int | None = None
    chunks: int = 0


@dataclass(frozen=True)
class Completion:
    """One call's answer as it was read, whole or up to its failure: the text (redacted), and the figures."""

    content: str = ""
    content_chars: int = 0  #: characters of content the model wrote (before redaction)
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
    #: The model's text held the key in some encoding (a provider or proxy echoing the request): it is no answer
    echoed: bool = False

    @property
    def output_chars(self) -> int:
        """What the model wrote: its content and its reasoning."""
        return self.content_chars + self.reasoning_chars


class StreamObserver(Protocol):
    """Who follows a call's stream (a progress reporter, a hedge race): handed the reader when the request is
    about to be sent, and again when the model first writes (content or reasoning)."""

    def started(self, reader: SSEReader) -> None: ...

    def first_text(self, reader: SSEReader) -> None: ...


@dataclass(frozen=True)
class Follow:
    """The observer of a caller that only reads the stream as it arrives (a progress reporter, a benchmark)."""

    watch: Callable[[SSEReader], None]

    def started(self, reader: SSEReader) -> None:
        self.watch(reader)

    def first_text(self, reader: SSEReader) -> None:
        pass


class SSEReader:
    """Reads a chat completion as it arrives: an SSE stream, or one JSON document.

    Which of the two is decided by the body itself, not its ``Content-Type``: gateways relabel a
    stream ``application/json`` or drop the header, so a body whose first non-blank byte opens a
    JSON value is a document and anything else is an event stream. Split out so the benchmark
    measures exactly this; nothing it reads can raise anything but an :class:`UpstreamError`."""

    def __init__(
        self,
        limits: StreamLimits,
        started: float,
        text_arrived: Callable[[], None] | None = None,
        observer: StreamObserver | None = None,
    ) -> None:
        """``text_arrived``: the watchdog's, at every text; ``observer``: told when the model first writes."""
        self.tally = StreamTally()
        self.limits = limits
        self.text_arrived = text_arrived
        self.observer = observer
        self.started = started
        self.first_text_at: float | None = None  #: monotonic time of the first text (content or reasoning)
        self.done = False
        self.document: bytearray | None = None  #: the body, when it is one JSON document
        self._framer: SSEFramer | None = None
        self._blank = b""  #: leading white space, before the body said what it is
        self._head = b""  #: the start of a body read as a stream (for the detail when it was no stream)
        self._so_far: tuple[int, str] = (0, "")  #: the parts the last text_so_far was made of, and it

    # What a progress reporter reads from another thread (plain attribute reads; nothing is locked).

    @property
    def content_chars(self) -> int:
        return self.tally.content_chars

    @property
    def reasoning_chars(self) -> int:
        return self.tally.reasoning_chars

    @property
    def completion_tokens(self) -> int | None:
        """Tokens written so far, when the provider reports usage while streaming."""
        usage = self.tally.usage
        return token_count(usage.get("completion_tokens")) if usage else None

    def text_so_far(self) -> str:
        """The text so far, redacted; read again only once more was written (the outline's head is polled every
        20 ms, and redacting reads the whole text in every form a key could take)."""
        parts = list(self.tally.parts)
        if self._so_far[0] != len(parts):
            self._so_far = (len(parts), redact("".join(parts)))
        return self._so_far[1]

    def completion(self) -> Completion:
        """What was read so far, as the reader alone knows it (the transport adds its own figures)."""
        tally = self.tally
        raw = "".join(tally.parts)
        return Completion(
            content=redact(raw),  # a model that echoes the request writes no key into a job
            echoed=key_echoed(raw),
            content_chars=tally.content_chars,
            reasoning_chars=tally.reasoning_chars,
            finish_reason=tally.finish_reason,
            usage=tally.usage,
            first_content_ms=tally.first_content_ms,
            chunks=tally.chunks,
        )

    @property
    def is_stream(self) -> bool | None:
        """``True`` for an event stream, ``False`` for one JSON document, ``None`` before the first byte."""
        if self._framer is not None:
            return True
        return None if self.document is None else False

    def feed(self, data: bytes) -> None:
        if self._framer is not None:
            if len(self._head) < HEAD_BYTES:
                self._head += data[: HEAD_BYTES - len(self._head)]
            self._framer.feed(data)
        elif self.document is not None:
            self.document += data
        else:
            data, self._blank = self._blank + data, b""
            head = data.lstrip(b" \t\r\n")
            if head.startswith(BOM):
                head = head[len(BOM) :].lstrip(b" \t\r\n")
            if not head or (len(head) < len(BOM) and BOM.startswith(head)):  # not yet telling what it is
                self._blank = data
                return
            if head[:1] in (b"{", b"["):
                self.document = bytearray(data)
            else:
                self._framer = SSEFramer(self._dispatch)
                self._head = data[:HEAD_BYTES]
                self._framer.feed(data)

    def finish(self) -> None:
        """The body ended: the last event of a stream, or the whole document."""
        if self._framer is not None:
            if not self.done:
                self._framer.close()
            if not self._framer.recognized:  # a proxy's HTML error page with status 200, say
                raise StreamError(f"answer is neither an event stream nor JSON: {snippet(self._head)}")
            if not self.done and self.tally.finish_reason is None:  # a proxy or a network cut it: not an answer
                raise ConnectionDropped(
                    "the stream ended with neither a finish reason nor [DONE]: cut on its way",
                    content_started=self.content_chars > 0,
                    bytes_received=len(self._head) if self.tally.chunks else 0,  # no chunk yet: worth a retry
                )
        elif self.document is not None:
            self._parse_document(bytes(self.document))

    def _dispatch(self, event_type: bytes, data: bytes) -> None:
        if self.done:
            return
        if event_type == b"error":
            raise StreamError(f"error event in stream: {snippet(data)}", content_started=self.content_chars > 0)
        data = data.strip()
        if data == b"[DONE]":
            self.done = True
            return
        if not data:
            return  # an empty event: a keep-alive some gateways send as `data:` with nothing after it
        try:
            event = json.loads(data)
        except ValueError as exc:
            raise StreamError(f"undecodable SSE data: {snippet(data)}", content_started=self.content_chars > 0) from exc
        self.event(event)

    def _parse_document(self, body: bytes) -> None:
        """An upstream that ignored ``stream: true`` (or was asked not to stream) and answered one JSON document."""
        body = body.lstrip(b" \t\r\n")
        try:
            doc = json.loads(body[len(BOM) :] if body.startswith(BOM) else body)
        except ValueError as exc:
            raise InvalidAnswer(f"non-stream answer is not JSON: {snippet(body)}") from exc
        self.event(doc)

    def event(self, event: Any) -> None:
        """One chunk (or a whole completion): text, reasoning, usage and finish reason wherever a provider puts them."""
        if not isinstance(event, dict):
            return
        choice = self._count(event)
        if choice is None:
            return  # usage only, or a content-filter prelude
        text, reasoning = self._texts_of(choice)
        self._add(text, reasoning)
        finish = choice.get("finish_reason")
        if finish and isinstance(finish, str):
            self.tally.finish_reason = redact(finish)[:64]  # stored in the job's metrics: model text like any other

    def _count(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """Refuse an error chunk or one too many; keep the usage; the first choice, if there is one."""
        error = error_in(event)
        if error is not None:
            raise StreamError(f"error in stream: {snippet(error)}", content_started=self.content_chars > 0)
        self.tally.chunks += 1
        if self.tally.chunks > self.limits.max_chunks:
            raise AnswerTooLarge(f"more than {self.limits.max_chunks} chunks", content_started=True)
        choice = first_candidate(event.get("choices"))
        usage = usage_of(event, choice)
        if usage:
            self.tally.usage = usage
        return choice

    def _texts_of(self, choice: dict[str, Any]) -> tuple[str, str]:
        """(text, reasoning) of a stream's delta, or of a whole message: a document, or a stream's terminal
        frame that repeats what it streamed (its usage counted; its text must not be appended twice)."""
        delta = choice.get("delta")
        if isinstance(delta, dict):
            return texts_of(delta)
        message = choice.get("message")
        text, reasoning = texts_of(message) if isinstance(message, dict) else ("", "")
        return ("" if self.tally.content_chars else text), ("" if self.tally.reasoning_chars else reasoning)

    def _add(self, text: str, reasoning: str) -> None:
        """Append what the model wrote; the first text's time and the observer, and the watchdog at every text."""
        tally = self.tally
        if text:
            if tally.first_content_ms is None:
                tally.first_content_ms = int((time.monotonic() - self.started) * 1000)
            tally.parts.append(text)
            tally.content_chars += len(text)
            if tally.content_chars > self.limits.max_content_chars:
                raise AnswerTooLarge(f"content over {self.limits.max_content_chars} characters", content_started=True)
        if reasoning:
            tally.reasoning_chars += len(reasoning)
        if not (text or reasoning):
            return
        if self.first_text_at is None:
            self.first_text_at = time.monotonic()
            if self.observer is not None:
                self.observer.first_text(self)
        if self.text_arrived is not None:
            self.text_arrived()
