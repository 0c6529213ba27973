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
from ..redaction import redact, redact_bytes, redact_tree
from .failures import AnswerTooLarge, ConnectionDropped, InvalidAnswer, StreamError, UpstreamError
from .sse import BOM, SSEFramer
from .transport import Cancellation, GuardedPost, TextLimits

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
    """Reads a chat completion as it arrives: an SSE stream, or one JSON document.

    Which of the two is decided by the body itself, not its ``Content-Type``: gateways relabel a
    stream ``application/json`` or drop the header, so a body whose first non-blank byte opens a
    JSON value is a document and anything else is an event stream. Split out so the benchmark
    measures exactly this; nothing it reads can raise anything but an :class:`UpstreamError`."""

    def __init__(
        self,
        limits: StreamLimits,
        started: float,
        on_text: Callable[[], None] | None = None,
        out: Completion | None = None,
        on_first_text: Callable[[SSEReader], None] | None = None,
    ) -> None:
        self.out = out if out is not None else Completion()
        self.limits = limits
        self.on_text = on_text
        self.on_first_text = on_first_text  #: called once, with this reader, when the model first writes
        self.started = started
        self.content_chars = 0
        self.first_text_at: float | None = None  #: monotonic time of the first text (content or reasoning)
        self.done = False
        self.document: bytearray | None = None  #: the body, when it is one JSON document
        self._framer: SSEFramer | None = None
        self._blank = b""  #: leading white space, before the body said what it is
        self._head = b""  #: the start of a body read as a stream (for the detail when it was no stream)

    # What a progress reporter reads from another thread (plain attribute reads; nothing is locked).

    @property
    def reasoning_chars(self) -> int:
        return self.out.reasoning_chars

    @property
    def completion_tokens(self) -> int | None:
        """Tokens written so far, when the provider reports usage while streaming."""
        usage = self.out.usage
        return token_count(usage.get("completion_tokens")) if usage else None

    def text_so_far(self) -> str:
        return redact("".join(list(self.out.parts)))

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
                raise StreamError(f"answer is neither an event stream nor JSON: {_snippet(self._head)}")
            if not self.done and self.out.finish_reason is None:  # a proxy or a network cut it: not an answer
                raise ConnectionDropped(
                    "the stream ended with neither a finish reason nor [DONE]: cut on its way",
                    content_started=self.content_chars > 0,
                    bytes_received=len(self._head) if self.out.chunks else 0,  # no chunk yet: worth a retry
                )
        elif self.document is not None:
            self._parse_document(bytes(self.document))

    def _dispatch(self, event_type: bytes, data: bytes) -> None:
        if self.done:
            return
        if event_type == b"error":
            raise StreamError(f"error event in stream: {_snippet(data)}", content_started=self.content_chars > 0)
        data = data.strip()
        if data == b"[DONE]":
            self.done = True
            return
        if not data:
            return  # an empty event: a keep-alive some gateways send as `data:` with nothing after it
        try:
            event = json.loads(data)
        except ValueError as exc:
            raise StreamError(
                f"undecodable SSE data: {_snippet(data)}", content_started=self.content_chars > 0
            ) from exc
        self.event(event)

    def _parse_document(self, body: bytes) -> None:
        """An upstream that ignored ``stream: true`` (or was asked not to stream) and answered one JSON document."""
        body = body.lstrip(b" \t\r\n")
        try:
            doc = json.loads(body[len(BOM) :] if body.startswith(BOM) else body)
        except ValueError as exc:
            raise InvalidAnswer(f"non-stream answer is not JSON: {_snippet(body)}") from exc
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
            self.out.finish_reason = redact(finish)[:64]  # stored in the job's metrics: model text like any other

    def _count(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """Refuse an error chunk or one too many; keep the usage; the first choice, if there is one."""
        error = _error_in(event)
        if error is not None:
            raise StreamError(f"error in stream: {_snippet(error)}", content_started=self.content_chars > 0)
        self.out.chunks += 1
        if self.out.chunks > self.limits.max_chunks:
            raise AnswerTooLarge(f"more than {self.limits.max_chunks} chunks", content_started=True)
        choice = _first_candidate(event.get("choices"))
        usage = _usage(event, choice)
        if usage:
            self.out.usage = usage
        return choice

    def _texts_of(self, choice: dict[str, Any]) -> tuple[str, str]:
        """(text, reasoning) of a stream's delta, or of a whole message: a document, or a stream's terminal
        frame that repeats what it streamed (its usage counted; its text must not be appended twice)."""
        delta = choice.get("delta")
        if isinstance(delta, dict):
            return _texts(delta)
        message = choice.get("message")
        text, reasoning = _texts(message) if isinstance(message, dict) else ("", "")
        return ("" if self.content_chars else text), ("" if self.out.reasoning_chars else reasoning)

    def _add(self, text: str, reasoning: str) -> None:
        """Append what the model wrote; the first text's time and hook, and every text's."""
        out = self.out
        if text:
            if out.first_content_ms is None:
                out.first_content_ms = int((time.monotonic() - self.started) * 1000)
            out.parts.append(text)
            self.content_chars += len(text)
            if self.content_chars > self.limits.max_content_chars:
                raise AnswerTooLarge(f"content over {self.limits.max_content_chars} characters", content_started=True)
        if reasoning:
            out.reasoning_chars += len(reasoning)
        if not (text or reasoning):
            return
        if self.first_text_at is None:
            self.first_text_at = time.monotonic()
            if self.on_first_text is not None:
                self.on_first_text(self)
        if self.on_text is not None:
            self.on_text()


def _first_candidate(choices: Any) -> dict[str, Any] | None:
    """The answer's choice: candidate 0 (``index`` 0, or no index as some gateways send). A stream of several
    candidates (``n`` > 1) interleaves their chunks: the others are not this answer's text."""
    if not isinstance(choices, list):
        return None
    for choice in choices:
        if isinstance(choice, dict) and choice.get("index", 0) in (0, None):
            return choice
    return None


def _error_in(event: dict[str, Any]) -> Any:
    """What says this chunk (or document) is an error, in each dialect: OpenAI's ``{"error": …}`` (also with
    choices, as OpenRouter sends it mid-stream), vLLM's ``{"object": "error", "message": …}``, MiniMax's
    ``base_resp`` with a non-zero ``status_code`` (its errors come with HTTP 200)."""
    if event.get("error"):
        return event["error"]
    if event.get("object") == "error":
        return event
    base = event.get("base_resp")
    if isinstance(base, dict) and base.get("status_code") not in (None, 0, "0"):
        return base
    return None


def cached_prompt_tokens(usage: dict[str, Any] | None) -> int | None:
    """The prompt tokens a provider's prefix cache held (billed at a fraction): OpenAI's and most others'
    ``prompt_tokens_details.cached_tokens``, DeepSeek's ``prompt_cache_hit_tokens``; None when not said."""
    if not usage:
        return None
    details = usage.get("prompt_tokens_details")
    found = token_count(details.get("cached_tokens")) if isinstance(details, dict) else None
    return found if found is not None else token_count(usage.get("prompt_cache_hit_tokens"))


def token_count(value: Any) -> int | None:
    """A provider's token count, or ``None`` for anything that is not one (a string, a bool, a negative)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _snippet(value: Any) -> str:
    """The start of something an upstream sent, for a failure's detail: decoded, then redacted, then formatted
    (never a ``repr`` redacted) and cut last, so a key the cut would halve is still recognised whole."""
    if isinstance(value, bytes | bytearray):
        return repr(redact_bytes(bytes(value[:4096])))[:200]
    if isinstance(value, str):
        return redact(value)[:300]
    try:
        return json.dumps(redact_tree(value), ensure_ascii=False)[:300]
    except (TypeError, ValueError):
        return redact(str(value))[:300]


def _usage(event: dict[str, Any], choice: dict[str, Any] | None) -> dict[str, Any] | None:
    """Token usage: top level (OpenAI), inside the choice (Moonshot), or a provider's extension (Groq's ``x_groq``)."""
    for holder in (event, choice, event.get("x_groq")):
        if isinstance(holder, dict):
            usage = holder.get("usage")
            if isinstance(usage, dict) and usage:
                return usage
    return None


def _texts(delta: dict[str, Any]) -> tuple[str, str]:
    """(content, reasoning) of a delta or message: content as a string or a list of typed parts
    (text parts are content, thinking/reasoning parts are reasoning); reasoning as ``reasoning_content``
    (DeepSeek, Qwen) or ``reasoning`` (OpenRouter, vLLM)."""
    content = delta.get("content")
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    reasoning = reasoning if isinstance(reasoning, str) else ""
    if isinstance(content, str):
        return content, reasoning
    if isinstance(content, list):
        text, thought = _parts(content)
        return text, reasoning + thought
    return "", reasoning


_REASONING_PARTS = frozenset({"thinking", "reasoning", "reasoning_text"})


def _parts(parts: list[Any]) -> tuple[str, str]:
    text: list[str] = []
    thought: list[str] = []
    for part in parts:
        if isinstance(part, str):
            text.append(part)
        elif isinstance(part, dict):
            kind = part.get("type")
            if kind in _REASONING_PARTS:
                thought.append(_flatten(part.get(kind) if kind in part else part.get("text")))
            elif kind in (None, "text", "output_text") and isinstance(part.get("text"), str):
                text.append(part["text"])
    return "".join(text), "".join(thought)


def _flatten(value: Any) -> str:
    """The text of a reasoning part: a string, or a list of text parts (Mistral's ``thinking``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_flatten(v.get("text") if isinstance(v, dict) else v) for v in value)
    return ""


def _read_answer_body(call: GuardedPost, reader: SSEReader, started: float) -> None:
    """Feed the answer's chunks to the reader as they arrive, timing the gaps between them. A body not
    announced as an event stream may be one JSON document, which has nothing to send before it is whole:
    only the deadline bounds it until its first byte says what it is."""
    out = reader.out
    announced = "text/event-stream" in call.response.headers.get("content-type", "")
    if not announced:
        call.suspend_text_limits()
    last = time.monotonic()
    for data in call.chunks():
        now = time.monotonic()
        out.max_gap_ms = max(out.max_gap_ms, int((now - last) * 1000))
        out.last_byte_ms = (now - started) * 1000
        last = now
        reader.feed(data)
        if not announced and reader.is_stream:
            announced = True  # a stream after all (relabelled): its text limits hold again
            call.resume_text_limits()
        if reader.done:
            break
    reader.finish()
    out.streamed = reader.is_stream is not False


def read_chat_completion(
    client: httpx.Client,
    url: str,
    payload: dict[str, Any],
    headers: dict[str, str],
    *,
    limits: StreamLimits,
    deadline: Deadline,
    watch: Callable[[SSEReader], None] | None = None,
    streamed: bool = True,
    out: Completion | None = None,
    cancellation: Cancellation | None = None,
    on_first_text: Callable[[SSEReader], None] | None = None,
) -> Completion:
    """POST ``payload`` and read the answer; raise an :class:`UpstreamError` on any failure.

    ``out`` (optional) is filled as the answer arrives, so a caller keeps what a failed call measured.
    ``cancellation`` (optional): once set, the call is closed at once and raises ``Cancelled``.
    ``on_first_text`` (optional) is called with the reader when the model first writes (a hedge's race).
    ``watch`` receives the reader before the request is sent (a progress reporter reads it).
    ``streamed=False``: the request asked for one JSON answer, which has nothing to send before it is
    whole, so only the deadline bounds it (the text limits would cut every such call).
    """
    started = time.monotonic()
    text = TextLimits(first_content_s=limits.first_content_s, idle_s=limits.idle_s) if streamed else None
    # The socket's own read timeout only backs the watchdog up (the idle limit sits inside the first-content one).
    read_timeout_s = limits.first_content_s if streamed else max(0.001, deadline.remaining_ms() / 1000)
    post = GuardedPost(
        client,
        url,
        payload,
        headers,
        deadline=deadline,
        read_timeout_s=read_timeout_s,
        max_bytes=limits.max_bytes,
        text=text,
        cancellation=cancellation,
    )
    reader = SSEReader(limits, started, on_text=post.text_arrived, out=out, on_first_text=on_first_text)
    if watch is not None:
        watch(reader)
    out = reader.out
    try:
        with post as call:
            out.http_status = call.status
            out.first_byte_ms = call.first_byte_ms
            if call.status != 200:
                raise call.status_error()
            _read_answer_body(call, reader, started)
    except UpstreamError as failure:
        if reader.content_chars > 0 and not failure.content_started:  # the transport cannot know about text
            raise failure.evolve(content_started=True) from failure
        raise
    finally:
        out.total_ms = int((time.monotonic() - started) * 1000)
    out.content = redact("".join(out.parts))  # a model that echoes the request writes no key into a job
    return out
