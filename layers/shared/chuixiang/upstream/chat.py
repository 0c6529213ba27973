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
from collections.abc import Callable
from typing import Any

import httpx

from ..deadline import Deadline
from ..redaction import redact
from .chat_events import cached_prompt_tokens, token_count
from .chat_reader import MAX_CONTENT_CHARS, MAX_STREAM_BYTES, Completion, SSEReader, StreamLimits
from .failures import UpstreamError
from .transport import Cancellation, GuardedPost, TextLimits

__all__ = [
    "MAX_CONTENT_CHARS",
    "MAX_STREAM_BYTES",
    "Completion",
    "SSEReader",
    "StreamLimits",
    "cached_prompt_tokens",
    "read_chat_completion",
    "token_count",
]


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
