"""The stream reader on its own (no socket): SSE framing as the WHATWG standard parses it, every chunk
shape providers send, and arbitrary input that may only ever end in an ``UpstreamError``."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chuixiang.upstream.chat_reader import Completion, SSEReader, StreamLimits
from chuixiang.upstream.failures import ConnectionDropped, InvalidAnswer, StreamError, UpstreamError
from chuixiang.upstream.sse import SSEFramer

LIMITS = StreamLimits(first_content_s=1, idle_s=1, max_chunks=10_000)


def read(body: bytes, splits: list[int] | None = None) -> SSEReader:
    """Feed ``body`` in pieces cut at ``splits`` (default: one byte at a time), then end it."""
    reader = SSEReader(LIMITS, started=time.monotonic())
    cuts = sorted(set(splits)) if splits is not None else list(range(1, len(body)))
    for start, end in zip([0, *cuts], [*cuts, len(body)], strict=True):
        reader.feed(body[start:end])
        if reader.done:
            break
    reader.finish()
    return reader


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **top: Any) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if delta is not None:
        choice["delta"] = delta
    return {"id": "c", "object": "chat.completion.chunk", "choices": [choice], **top}


def sse(*events: dict[str, Any], eol: str = "\n", done: bool = True) -> bytes:
    lines = [f"data: {json.dumps(e, ensure_ascii=False)}{eol}{eol}" for e in events]
    return ("".join(lines) + (f"data: [DONE]{eol}{eol}" if done else "")).encode()


HELLO = sse(
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "番茄"}),
    chunk({"content": "炒蛋"}),
    chunk({}, "stop"),
)


# --- framing --------------------------------------------------------------------------------------


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_every_line_ending_and_every_split_point(eol: str) -> None:
    body = HELLO.replace(b"\n", eol.encode())
    for cut in range(1, len(body)):  # including inside the three bytes of 番
        reader = read(body, [cut])
        assert (reader.tally.parts, reader.tally.finish_reason, reader.done) == (["番茄", "炒蛋"], "stop", True), cut
    assert read(body).tally.parts == ["番茄", "炒蛋"]  # one byte per read


def test_a_crlf_split_between_two_reads_is_one_line_end() -> None:
    events: list[tuple[bytes, bytes]] = []
    framer = SSEFramer(lambda kind, data: events.append((kind, data)))
    for piece in (b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"):
        framer.feed(piece)
    assert events == [(b"", b"a\nb")]


def test_fields_as_the_standard_reads_them() -> None:
    events: list[tuple[bytes, bytes]] = []
    framer = SSEFramer(lambda kind, data: events.append((kind, data)))
    framer.feed(
        b"\xef\xbb\xbf: a comment\n"  # BOM, then a comment
        b"data:no-space\n\n"
        b"data:  two spaces\n\n"  # only one space is removed
        b'event: message\nid: 7\nretry: 100\nfoo: bar\ndata: {"a":\ndata: 1}\n\n'  # several data lines
        b"event: ping\n\n"  # no data: nothing dispatched, the type forgotten
        b"data\n\n"  # a field with no colon: empty data
        b"data: last"
    )  # no blank line before the end
    framer.close()
    assert events == [(b"", b"no-space"), (b"", b" two spaces"), (b"message", b'{"a":\n1}'), (b"", b""), (b"", b"last")]


def test_a_bom_split_across_reads_is_still_removed() -> None:
    events: list[tuple[bytes, bytes]] = []
    framer = SSEFramer(lambda kind, data: events.append((kind, data)))
    for byte in b"\xef\xbb\xbfdata: x\n\n":
        framer.feed(bytes([byte]))
    assert events == [(b"", b"x")]


def test_multi_line_data_is_one_json_chunk() -> None:
    body = b'data: {"choices": [{"delta":\ndata: {"content": "hi"}}]}\n\ndata: [DONE]\n\n'
    assert read(body).tally.parts == ["hi"]


def test_error_events_and_error_fields_are_upstream_errors() -> None:
    with pytest.raises(StreamError, match="overloaded"):
        read(b'event: error\ndata: {"message": "overloaded"}\n\n')
    with pytest.raises(StreamError, match="slot unavailable"):  # llama.cpp's server writes an `error:` line
        read(b'error: {"code": 503, "message": "slot unavailable", "type": "unavailable_error"}\n\n')
    with pytest.raises(StreamError, match="undecodable") as caught:
        read(sse(chunk({"content": "半"}), done=False) + b"data: {not json\n\n")
    assert caught.value.content_started


# --- chunk shapes ---------------------------------------------------------------------------------


def test_content_as_a_list_of_typed_parts() -> None:
    parts = [{"type": "thinking", "thinking": [{"type": "text", "text": "想一想"}]}, {"type": "text", "text": "答"}]
    out = read(sse(chunk({"content": parts}), chunk({"content": [{"type": "text", "text": "案"}]}, "stop"))).tally
    assert ("".join(out.parts), out.reasoning_chars, out.finish_reason) == ("答案", 3, "stop")


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_fields_are_reasoning_not_content(field: str) -> None:
    reader = read(sse(chunk({field: "先想"}), chunk({"content": "写"}, "stop")))
    assert (reader.tally.parts, reader.tally.reasoning_chars) == (["写"], 2)
    assert reader.first_text_at is not None and reader.tally.first_content_ms is not None


def test_usage_wherever_a_provider_puts_it() -> None:
    top = {"prompt_tokens": 1, "completion_tokens": 2}
    in_choice = chunk({}, "stop")
    in_choice["choices"][0]["usage"] = {"completion_tokens": 3}  # Moonshot
    groq = chunk({}, "stop", x_groq={"usage": {"completion_tokens": 4}})  # Groq
    assert read(sse(chunk({"content": "x"}), {"choices": [], "usage": top})).tally.usage == top
    assert read(sse(chunk({"content": "x"}), in_choice)).tally.usage == {"completion_tokens": 3}
    assert read(sse(chunk({"content": "x"}), groq)).completion_tokens == 4
    assert read(sse(chunk({"content": "x"}, usage=None), chunk({}, "stop", usage="n/a"))).tally.usage is None


def test_preludes_choices_without_delta_and_finish_with_content() -> None:
    prelude = {"choices": [], "prompt_filter_results": [{"prompt_index": 0}]}  # Azure's content-filter prelude
    no_delta: dict[str, Any] = {"choices": [{"index": 0, "finish_reason": None, "content_filter_offsets": {}}]}
    out = read(sse(prelude, chunk({"content": "甲"}), no_delta, chunk({"content": "乙"}, "stop"))).tally
    assert (out.parts, out.finish_reason) == (["甲", "乙"], "stop")


def test_a_terminal_frame_that_repeats_the_answer_is_not_appended_again() -> None:
    message = {"role": "assistant", "content": "番茄炒蛋"}
    final = {"choices": [{"index": 0, "finish_reason": "stop", "message": message}], "usage": {"completion_tokens": 5}}
    out = read(sse(chunk({"content": "番茄"}), chunk({"content": "炒蛋"}), final)).tally
    assert ("".join(out.parts), out.finish_reason, out.usage) == ("番茄炒蛋", "stop", {"completion_tokens": 5})
    # … but a whole answer in one frame, with nothing streamed before it, is the answer.
    assert read(sse(final)).tally.parts == ["番茄炒蛋"]


def test_a_json_document_whatever_the_content_type() -> None:
    doc = {"choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "整篇"}}]}
    reader = read(b"\n  " + json.dumps(doc, ensure_ascii=False).encode())
    assert (reader.is_stream, reader.tally.parts, reader.tally.finish_reason) == (False, ["整篇"], "stop")
    with pytest.raises(StreamError, match="quota"):  # an error body with status 200
        read(b'{"error": {"message": "quota exceeded", "code": "insufficient_quota"}}')
    with pytest.raises(InvalidAnswer):
        read(b'{"choices": [')


def test_completion_tokens_ignores_what_is_not_a_count() -> None:
    for value in (True, "12", 1.5, None):
        assert read(sse(chunk({"content": "x"}, "stop", usage={"completion_tokens": value}))).completion_tokens is None


# --- nothing from a provider raises anything else -------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
keys = st.sampled_from(
    [
        "content",
        "reasoning",
        "reasoning_content",
        "role",
        "type",
        "text",
        "thinking",
        "usage",
        "finish_reason",
        "message",
        "delta",
        "choices",
        "error",
        "x_groq",
        "completion_tokens",
    ]
)
shaped = st.recursive(
    json_values, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4), max_leaves=20
)
frames = st.one_of(
    shaped.map(lambda v: b"data: " + json.dumps(v).encode() + b"\n\n"),
    st.binary(max_size=40),
    st.sampled_from(
        [
            b"data: [DONE]\n\n",
            b": keep-alive\n\n",
            b"event: error\n",
            b"\r",
            b"\n",
            b"data:",
            b"error: x\n\n",
            b"\xef\xbb\xbf",
            b"\xe7\x95",
            b"{",
            b"}",
        ]
    ),
)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(frames, max_size=12), st.lists(st.integers(min_value=1, max_value=400), max_size=6))
def test_any_bytes_end_in_a_completion_or_an_upstream_error(pieces: list[bytes], splits: list[int]) -> None:
    body = b"".join(pieces)
    try:
        reader = read(body, [s for s in splits if s < len(body)])
    except UpstreamError:
        return
    out: Completion = reader.completion()
    assert isinstance(reader.text_so_far(), str) and all(isinstance(p, str) for p in reader.tally.parts)
    assert isinstance(out.content, str) and out.content_chars == sum(len(p) for p in reader.tally.parts)
    assert out.usage is None or isinstance(out.usage, dict)
    assert out.finish_reason is None or isinstance(out.finish_reason, str)
    assert reader.completion_tokens is None or isinstance(reader.completion_tokens, int)


def test_empty_data_events_are_keep_alives() -> None:
    out = read(b"data:\n\ndata: \n\n" + HELLO).tally
    assert out.parts == ["番茄", "炒蛋"]


@pytest.mark.parametrize(
    "doc",
    [
        {"object": "error", "message": "EngineCore encountered an issue", "type": "InternalServerError", "code": 500},
        {"choices": None, "base_resp": {"status_code": 1008, "status_msg": "insufficient balance"}},
        {
            "id": "x",
            "error": {"code": "server_error", "message": "Provider disconnected"},
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
        },
    ],
)
def test_every_dialect_of_error_is_an_upstream_error(doc: dict[str, Any]) -> None:
    with pytest.raises(StreamError):
        read(sse(chunk({"content": "x"}), doc))
    ok = {
        "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "stop"}],
        "base_resp": {"status_code": 0},
    }
    assert read(sse(ok)).tally.parts == ["x"]


def test_a_body_that_is_neither_a_stream_nor_json_is_an_upstream_error() -> None:
    with pytest.raises(StreamError, match=r"neither an event stream nor JSON.*502 Bad Gateway"):
        read(b"<html><body><h1>502 Bad Gateway</h1></body></html>\n")
    # An event stream that ends before any chunk, finish reason or [DONE]: cut on its way, worth a retry.
    with pytest.raises(ConnectionDropped, match="neither a finish reason nor") as cut:
        read(b": only a keep-alive, then the end\n\n")
    assert cut.value.transient


def test_a_stream_that_ends_with_neither_a_finish_reason_nor_done_was_cut() -> None:
    """A proxy or a network that closes the connection mid-answer: what arrived is no answer, and the model is not
    to blame for it (before: taken as finished, then refused RECIPE_INVALID)."""
    chunk = {"choices": [{"index": 0, "delta": {"content": '{"name": "番茄'}, "finish_reason": None}]}
    with pytest.raises(ConnectionDropped) as cut:
        read(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    assert cut.value.content_started and not cut.value.transient
    done = read(b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n")  # [DONE] alone ends it
    assert done.tally.parts == ['{"name": "番茄']
    finished = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    assert read(b"data: " + json.dumps(finished).encode() + b"\n\n").tally.finish_reason == "stop"


def test_only_candidate_zero_is_the_answer() -> None:
    """``n`` > 1: a provider interleaves the candidates' chunks by ``choices[].index``; the answer is candidate 0."""
    events: list[dict[str, Any]] = [
        {"choices": [{"index": i, "delta": {"content": f"<{i}:{part}>"}, "finish_reason": None}]}
        for part in ("a", "b")
        for i in (0, 1, 2)
    ]
    events.append({"choices": [{"index": 1, "delta": {}, "finish_reason": "length"}]})
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    reader = read(body)
    assert "".join(reader.tally.parts) == "<0:a><0:b>" and reader.tally.finish_reason == "stop"


def test_a_json_document_after_a_bom() -> None:
    doc = {"choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "整篇"}}]}
    assert read(b"\xef\xbb\xbf" + json.dumps(doc).encode()).tally.parts == ["整篇"]
