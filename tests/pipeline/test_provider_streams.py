"""What real providers sent, replayed on a real socket through the stream reader and the recipe stage.

Every recording in ``tests/provider_streams/`` is replayed in several reads (one event per write, as a
model sends, and cut at random points), in each framing the SSE standard allows (as recorded, CRLF, CR,
``data:`` without the space, a BOM), under the Content-Types gateways really use (``text/event-stream``,
``application/json``, none). Each must give the text, reasoning, finish reason and usage its header
names, and the recipe stage the outcome it names. Five recorded envelopes carrying a recipe go end to
end through ``chuixiang cook --model-base-url`` to SUCCEEDED.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial

import httpx
import pytest

from chuixiang.deadline import Deadline
from chuixiang.generation.recipe import to_recipe
from chuixiang.generation.stage import code_for
from chuixiang.upstream.chat import Completion, StreamLimits, read_chat_completion
from chuixiang.upstream.failures import UpstreamError
from chuixiang_local.model.fake_model import recipe_for

from ..provider_corpus import Recording, Replay, ReplayServer, random_cuts, recordings, with_content
from ..serve_helper import ROOT

CORPUS = recordings()
LIMITS = StreamLimits(first_content_s=5, idle_s=5, max_chunks=10_000)


@pytest.fixture(scope="module")
def server() -> Iterator[ReplayServer]:
    replay = ReplayServer(Replay(b""))
    yield replay
    replay.close()


def read_through(server: ReplayServer, replay: Replay) -> Completion:
    server.replay = replay
    with httpx.Client() as client:
        deadline = Deadline(at=time.monotonic() + 10, bound_by="total", budget_ms=10_000)
        return read_chat_completion(client, f"{server.base_url}/chat/completions", {"stream": True}, {},
                                    limits=LIMITS, deadline=deadline)


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


#: Recorded envelopes that carry a whole answer in their content: each gets the recipe instead.
RECIPE_CARRIERS = ["openai-gpt-4.1-nano-text.sse", "deepseek-v4-flash-reasoning.sse", "groq-llama-3.3-70b-text.sse",
                   "moonshot-kimi-k2.5-usage-in-choice.sse", "minimax-m2.7-terminal-message-frame.sse",
                   "qwen3-max-dashscope-text.sse"]


def recipe_stream(name: str) -> bytes:
    recording = next(r for r in CORPUS if r.name == name)
    return with_content(recording.body, json.dumps(recipe_for("番茄炒蛋"), ensure_ascii=False))


@pytest.mark.parametrize("name", RECIPE_CARRIERS[:5])
def test_cook_against_a_replayed_provider_succeeds(name: str) -> None:
    with ReplayServer(Replay(recipe_stream(name), partial(random_cuts, seed=name, pieces=40))) as server:
        env = {**os.environ, "MODEL_API_KEY": "sk-replay-0123456789abcdef"}
        done = subprocess.run([sys.executable, "-m", "chuixiang_local.commands.cli", "cook", "番茄炒蛋", "--json",
                               "--model-base-url", server.base_url], capture_output=True, text=True, timeout=120,
                              env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert doc["status"] == "SUCCEEDED" and doc["recipe"]["name"] == "番茄炒蛋" and doc["image"], doc
    assert doc["metrics"]["recipe"]["calls"][0]["outcome"] == "ok"
    assert server.chat_requests and server.chat_requests[0]["stream"] is True
