"""What real providers sent, replayed on a real socket through the stream reader and the recipe stage.

Every recording in ``tests/provider_streams/`` is replayed in several reads (one event per write, as a
model sends, and cut at random points), in each framing the SSE standard allows (as recorded, CRLF, CR,
``data:`` without the space, a BOM), under the Content-Types gateways really use (``text/event-stream``,
``application/json``, none). Each must give the text, reasoning, finish reason and usage its header
names, and the recipe stage the outcome it names. Five recorded envelopes carrying a recipe go end to
end through ``chuixiang cook --model-base-url`` to SUCCEEDED.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial

import pytest
from stack_template import Template

from chuixiang.deadline import Deadline
from chuixiang.generation.recipe import to_recipe
from chuixiang.generation.stage import code_for
from chuixiang.upstream.chat import ChatRequest, read_chat_completion
from chuixiang.upstream.chat_reader import Completion, Follow, SSEReader, StreamLimits
from chuixiang.upstream.failures import UpstreamError
from chuixiang_local.loopback import loopback_client

from ..support.provider_corpus import (
    RECIPE_CARRIERS,
    Recording,
    Replay,
    ReplayServer,
    events,
    random_cuts,
    recipe_stream,
    recordings,
    reframe,
)
from ..support.stages import run_recipe

CORPUS = recordings()
FRAMINGS = ["as-recorded", "crlf", "cr", "no-space", "bom"]
CONTENT_TYPES = ["text/event-stream", "application/json", None]
LIMITS = StreamLimits(first_content_s=5, idle_s=5, max_chunks=10_000)


@pytest.fixture(scope="module")
def server() -> Iterator[ReplayServer]:
    replay = ReplayServer(Replay(b""))
    yield replay
    replay.close()


def test_the_corpus_is_real_and_broad() -> None:
    providers = {r.provider.split(" (")[0].split(":")[0].split(" on ")[0] for r in CORPUS}
    assert len(CORPUS) >= 30 and len(providers) >= 12, sorted(providers)
    for r in CORPUS:
        assert r.source.startswith("https://"), r.name
        assert r.fidelity and {"outcome", "text"} <= set(r.expect), r.name
    variants = {
        "reasoning": any(r.expect.get("reasoning") for r in CORPUS),
        "content parts": any(b'"content":[{' in r.body for r in CORPUS),
        "usage in choice": any(b'"finish_reason":"stop","usage"' in r.body for r in CORPUS),
        "x_groq usage": any(b'"x_groq":{"id":"req_01kh52ndshfr2azv0xe6tnv4fx","usage"' in r.body for r in CORPUS),
        "choices []": any(b'"choices":[]' in r.body for r in CORPUS),
        "terminal message": any(b'"object":"chat.completion","usage"' in r.body for r in CORPUS),
        "error object": any(r.expect["outcome"] == "RECIPE_UPSTREAM_ERROR" for r in CORPUS),
        "error field line": any(r.body.startswith(b"error:") for r in CORPUS),
        "comments": any(r.body.startswith(b":") for r in CORPUS),
        "one document": any(r.is_document for r in CORPUS),
        "length": any(r.expect.get("finish") == "length" for r in CORPUS),
    }
    assert all(variants.values()), variants


def read_through(server: ReplayServer, replay: Replay) -> Completion:
    server.replay = replay
    with loopback_client() as client:
        deadline = Deadline(at=time.monotonic() + 10, bound_by="total", budget_ms=10_000)
        request = ChatRequest(f"{server.base_url}/chat/completions", {"stream": True}, LIMITS)
        return read_chat_completion(client, request, deadline)


def check(recording: Recording, completion: Completion | None, failure: UpstreamError | None) -> None:
    expect = recording.expect
    if failure is not None:
        assert expect["outcome"] == code_for("RECIPE", failure).value, failure
        assert expect["error"] in failure.detail
        return
    assert completion is not None
    assert completion.content == expect["text"]
    assert completion.reasoning_chars == expect.get("reasoning", 0)
    assert completion.finish_reason == expect.get("finish")
    tokens = (completion.usage or {}).get("completion_tokens")
    assert tokens == expect.get("completionTokens"), completion.usage
    assert completion.streamed is not recording.is_document
    try:
        to_recipe(completion)
        outcome = "SUCCEEDED"
    except UpstreamError as invalid:
        outcome = code_for("RECIPE", invalid).value
    assert outcome == expect["outcome"]


def replayed(recording: Recording, replay: Replay, server: ReplayServer) -> None:
    try:
        completion, failure = read_through(server, replay), None
    except UpstreamError as caught:
        completion, failure = None, caught
    check(recording, completion, failure)


@pytest.mark.parametrize("recording", CORPUS, ids=lambda r: r.name)
def test_recorded_stream_one_event_per_read(recording: Recording, server: ReplayServer) -> None:
    replayed(recording, Replay(recording.body), server)


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("recording", [r for r in CORPUS if not r.is_document], ids=lambda r: r.name)
def test_recorded_stream_in_every_framing_cut_anywhere(
    recording: Recording, framing: str, server: ReplayServer
) -> None:
    body = reframe(recording.body, framing)
    content_type = CONTENT_TYPES[FRAMINGS.index(framing) % len(CONTENT_TYPES)]
    replayed(recording, Replay(body, partial(random_cuts, seed=recording.name + framing), content_type), server)
    replayed(recording, Replay(body, events, content_type), server)


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
@pytest.mark.parametrize("recording", [r for r in CORPUS if r.is_document], ids=lambda r: r.name)
def test_one_document_whatever_the_content_type(
    recording: Recording, content_type: str | None, server: ReplayServer
) -> None:
    replayed(recording, Replay(recording.body, partial(random_cuts, seed=recording.name), content_type), server)


def test_the_reader_sees_text_as_it_arrives_not_at_the_end(server: ReplayServer) -> None:
    """A relabelled stream is still read as a stream: its first content is timed when it arrives."""
    recording = next(r for r in CORPUS if r.name.startswith("openai-gpt-4.1"))
    writes = events(recording.body)

    def slow(body: bytes) -> list[bytes]:
        return writes  # the server flushes each; the reader must not wait for the end of the body

    seen: list[float] = []

    def watch(reader: SSEReader) -> None:
        original = reader.text_arrived

        def text_arrived() -> None:
            seen.append(time.monotonic())
            if original is not None:
                original()

        reader.text_arrived = text_arrived

    server.replay = Replay(recording.body, slow, "application/json")
    with loopback_client() as client:
        deadline = Deadline(at=time.monotonic() + 10, bound_by="total", budget_ms=10_000)
        request = ChatRequest(f"{server.base_url}/chat/completions", {}, LIMITS)
        out = read_chat_completion(client, request, deadline, observer=Follow(watch))
    assert out.streamed and len(seen) == sum(1 for w in writes if b'"content":"' in w and b'"content":""' not in w)


@pytest.mark.parametrize("name", RECIPE_CARRIERS)
def test_a_recorded_envelope_carrying_a_recipe_through_the_stage(
    name: str, server: ReplayServer, scaled_template: Template
) -> None:
    server.replay = Replay(recipe_stream(name), partial(random_cuts, seed=name, pieces=40))
    outcome, _ = run_recipe(scaled_template, server.base_url, 5000)
    assert outcome.error is None and outcome.result is not None, outcome.error
    assert outcome.result.name == "番茄炒蛋" and len(outcome.result.steps) == 6
