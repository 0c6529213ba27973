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

import time
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from ..deadline import Deadline
from .chat_reader import (
    Completion,
    SSEReader,
    StreamLimits,
    StreamObserver,
)
from .failures import UpstreamError
from .transport import GuardedPost, GuardedRequest
from .watchdog import Cancellation, TextLimits

__all__ = ["ChatCall", "ChatRequest", "chat_call", "read_chat_completion"]


@dataclass(frozen=True)
class ChatRequest:
    """One chat call: where it goes, what it sends, and the limits its answer is read within.

    ``streamed=False``: the request asked for one JSON answer, which has nothing to send before it is whole, so
    only the deadline bounds it (the text limits would cut every such call)."""

    url: str
    payload: dict[str, Any]
    limits: StreamLimits
    headers: dict[str, str] = field(default_factory=dict)
    streamed: bool = True


@dataclass(frozen=True)
class ChatCall:
    """What one call came back with: what was read (all of it, or up to the failure) and the failure, if any."""

    completion: Completion
    failure: UpstreamError | None = None


@dataclass
class _Timing:
    """The transport's side of one call's figures, as the body arrives."""

    http_status: int | None = None
    first_byte_ms: int | None = None
    max_gap_ms: int = 0
    last_byte_ms: float | None = None
    streamed: bool = True


def _read_answer_body(call: GuardedPost, reader: SSEReader, started: float, timing: _Timing) -> None:
    """Feed the answer's chunks to the reader as they arrive, timing the gaps between them. A body not
    announced as an event stream may be one JSON document, which has nothing to send before it is whole:
    only the deadline bounds it until its first byte says what it is."""
    announced = "text/event-stream" in call.response.headers.get("content-type", "")
    if not announced:
        call.suspend_text_limits()
    last = time.monotonic()
    for data in call.chunks():
        now = time.monotonic()
        timing.max_gap_ms = max(timing.max_gap_ms, int((now - last) * 1000))
        timing.last_byte_ms = (now - started) * 1000
        last = now
        reader.feed(data)
        if not announced and reader.is_stream:
            announced = True  # a stream after all (relabelled): its text limits hold again
            call.resume_text_limits()
        if reader.done:
            break
    reader.finish()
    timing.streamed = reader.is_stream is not False


def _completion(reader: SSEReader, timing: _Timing, total_ms: int) -> Completion:
    return replace(
        reader.completion(),
        http_status=timing.http_status,
        first_byte_ms=timing.first_byte_ms,
        max_gap_ms=timing.max_gap_ms,
        last_byte_ms=timing.last_byte_ms,
        total_ms=total_ms,
        streamed=timing.streamed,
    )


def chat_call(
    client: httpx.Client,
    request: ChatRequest,
    deadline: Deadline,
    *,
    observer: StreamObserver | None = None,
    cancellation: Cancellation | None = None,
) -> ChatCall:
    """POST the request and read the answer within its limits and ``deadline``; what was read comes back with
    the failure (:class:`UpstreamError`), never without it. ``cancellation`` (optional): once set, the call is
    closed at once and fails ``Cancelled``. ``observer`` (optional) follows the stream."""
    started, limits = time.monotonic(), request.limits
    text = TextLimits(first_content_s=limits.first_content_s, idle_s=limits.idle_s) if request.streamed else None
    # The socket's own read timeout only backs the watchdog up (the idle limit sits inside the first-content one).
    read_timeout_s = limits.first_content_s if request.streamed else max(0.001, deadline.remaining_ms() / 1000)
    post = GuardedPost(
        client,
        GuardedRequest(
            request.url,
            request.payload,
            request.headers,
            deadline,
            read_timeout_s=read_timeout_s,
            max_bytes=limits.max_bytes,
            text=text,
            cancellation=cancellation,
        ),
    )
    reader = SSEReader(limits, started, text_arrived=post.text_arrived, observer=observer)
    if observer is not None:
        observer.started(reader)
    timing, failure = _Timing(), None
    try:
        with post as call:
            timing.http_status, timing.first_byte_ms = call.status, call.first_byte_ms
            if call.status != 200:
                raise call.status_error()
            _read_answer_body(call, reader, started, timing)
    except UpstreamError as raised:
        failure = raised
        if reader.content_chars and not raised.content_started:  # the transport cannot know about text
            failure = raised.evolve(content_started=True)
            failure.__cause__ = raised
    return ChatCall(_completion(reader, timing, int((time.monotonic() - started) * 1000)), failure)


def read_chat_completion(
    client: httpx.Client,
    request: ChatRequest,
    deadline: Deadline,
    *,
    observer: StreamObserver | None = None,
    cancellation: Cancellation | None = None,
) -> Completion:
    """:func:`chat_call`, raising its failure."""
    done = chat_call(client, request, deadline, observer=observer, cancellation=cancellation)
    if done.failure is not None:
        raise done.failure
    return done.completion
