"""Progress and the partial recipe while the model writes: what is shown, how often it is written, and
that a late write can never touch a job that has moved on."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import pytest
from model_samples import recipe_for

from chuixiang.generation.progress import MAX_STREAMING_PERCENT, ProgressReporter, partial_recipe
from chuixiang.generation.recipe import to_recipe
from chuixiang.generation.recipe_call import with_thinking
from chuixiang.generation.recipe_format import strip_reasoning
from chuixiang.schemas import Progress
from chuixiang.upstream.chat_reader import Completion
from chuixiang.upstream.failures import EmptyAnswer

FINAL = recipe_for("番茄炒蛋")
TEXT = json.dumps(FINAL, ensure_ascii=False)


# --- the partial recipe (fast) ---------------------------------------------------------------


@pytest.mark.parametrize(
    "prefix", ["", "<think>先想想用什么食材。</think>", "```json\n"], ids=["plain", "think", "fence"]
)
def test_partial_recipe_never_shows_what_is_still_being_written(prefix: str) -> None:
    """Every prefix of a streamed recipe: each shown field equals the final one, steps only grow."""
    text = prefix + TEXT
    shown_steps = 0
    seen: set[str] = set()
    for n in range(1, len(text) + 1):
        partial = partial_recipe(text[:n]) or {}
        for key in ("name", "summary", "ingredients"):
            if key in partial:
                assert partial[key] == FINAL[key], (n, key)
                seen.add(key)
        steps_now = partial.get("steps", [])
        assert steps_now == FINAL["steps"][: len(steps_now)], n  # finished steps only, in order
        assert len(steps_now) >= shown_steps, n
        shown_steps = len(steps_now)
    assert seen == {"name", "summary", "ingredients"} and shown_steps == len(FINAL["steps"])


def test_partial_recipe_of_nothing_useful() -> None:
    assert partial_recipe("") is None
    assert partial_recipe("<think>还在想") is None
    assert partial_recipe('{"name": "番茄') is None  # the name may still grow
    assert partial_recipe('{"name": 12, "summary": "x", "steps": [') == {"summary": "x", "steps": []}


def test_think_tags_are_reasoning_not_content() -> None:
    assert strip_reasoning("<think>a</think>{}") == ("{}", len("<think>a</think>"))
    assert strip_reasoning("{} <think>unclosed") == ("{} ", len("<think>unclosed"))
    done = Completion(content="<think>先想想</think>\n" + TEXT, finish_reason="stop")
    assert to_recipe(done).name == "番茄炒蛋" and with_thinking(done).reasoning_chars == len("<think>先想想</think>")
    spent = Completion(content="<think>" + "想" * 50, finish_reason="length")
    with pytest.raises(EmptyAnswer, match="token budget"):
        to_recipe(spent)


# --- the progress figures (fast) -------------------------------------------------------------


@dataclass
class FakeStream:
    content_chars: int = 0
    reasoning_chars: int = 0
    completion_tokens: int | None = None
    first_text_at: float | None = None
    text: str = ""

    def text_so_far(self) -> str:
        return self.text


def test_progress_figures() -> None:
    now = [100.0]
    reporter = ProgressReporter(lambda p, q: True, interval_s=1, expected_tokens=1000, clock=lambda: now[0])
    assert reporter.progress() is None
    stream = FakeStream(first_text_at=100.0)
    reporter.watch(stream)
    waiting = reporter.progress()
    assert waiting and waiting.percent == 0 and waiting.etaMs is None  # no rate before any text
    stream.content_chars, now[0] = 600, 110.0  # 600 chars ~ 500 tokens in 10 s: 50 tokens/s
    p = reporter.progress()
    assert p and (p.tokens, p.percent, p.etaMs) == (500, 50, 10_000)
    stream.completion_tokens = 400  # the provider's usage wins over the estimate
    p = reporter.progress()
    assert p and (p.tokens, p.percent, p.etaMs) == (400, 40, 15_000)
    stream.completion_tokens = 5000  # longer than expected: never 100 before validation
    p = reporter.progress()
    assert p and p.percent == MAX_STREAMING_PERCENT and p.etaMs == 0
    assert reporter.finished().percent == 100


def test_a_failed_write_is_ignored_and_an_unchanged_state_is_a_heartbeat_without_the_partial() -> None:
    calls: list[tuple[int, bool]] = []

    def write(progress: Progress, partial: Any) -> bool:
        calls.append((progress.chars, partial is not None))
        raise RuntimeError("throttled")

    reporter = ProgressReporter(write, interval_s=1, expected_tokens=100)
    stream = FakeStream(content_chars=10, first_text_at=time.monotonic())
    stream.text = '{"name": "番茄炒蛋", "summary": "家常"'
    reporter.watch(stream)
    assert reporter.report() and reporter.report()  # the failure is swallowed
    stream.content_chars = 20
    assert reporter.report()
    # The same state is written again (the write is the job's liveness check), without re-parsing the partial.
    assert calls == [(10, True), (10, False), (20, True)]
    assert not reporter.cancellation.is_set()


def test_a_write_that_no_longer_applies_cancels_the_call() -> None:
    reporter = ProgressReporter(lambda progress, partial: False, interval_s=1, expected_tokens=100)
    heard: list[str] = []
    reporter.cancellation.listen(lambda: heard.append(reporter.cancellation.reason))
    reporter.watch(FakeStream(content_chars=10, first_text_at=time.monotonic()))
    assert reporter.report() is False
    assert heard == ["the job no longer runs the recipe stage"]


def test_the_parts_shown_stay_until_the_whole_answer_written_after_the_sections_shows_as_much() -> None:
    """Sections abandoned for a whole answer: the partial a user had (the outline, two steps) is written again
    while the whole answer's own partial shows less, then the whole answer's from when it shows as much."""
    written: list[Any] = []

    def write(progress: Progress, partial: Any) -> bool:
        written.append(partial)
        return True

    reporter = ProgressReporter(write, interval_s=1, expected_tokens=100)
    head = '{"name": "番茄炒蛋", "summary": "家常", "ingredients": {"main": [{"name": "鸡蛋"}]}, "steps": ['
    step = '{"order": %d, "text": "炒%d"}, '
    sections = FakeStream(
        content_chars=10, first_text_at=time.monotonic(), text=head + "".join(step % (n, n) for n in (1, 2, 3))
    )
    reporter.watch(sections)
    reporter.report()
    shown = written[-1]
    assert shown and len(shown["steps"]) == 2
    reporter.hold_partial()
    whole = FakeStream(content_chars=1, first_text_at=time.monotonic(), text='{"name": "番茄炒蛋", "summ')
    reporter.watch(whole)
    reporter.report()
    assert written[-1] == shown  # the whole answer has only its name: the parts shown stay
    whole.text, whole.content_chars = head + "".join(step % (n, n) for n in (1, 2, 3, 4)), 50
    reporter.report()
    assert len(written[-1]["steps"]) == 3  # it shows more: it replaces them, and holds no longer
    whole.text, whole.content_chars = '{"name": "番茄炒蛋", "su', 60
    reporter.report()
    assert written[-1] is None  # nothing complete: the stored partial is left as it was (not held again)


# --- through the recipe step, on a real socket, with the job in DynamoDB (moto) ----------------


# --- what a client polling `chuixiang serve` sees ----------------------------------------------


def test_provider_quirks_in_the_stream() -> None:
    """Reasoning under ``reasoning`` (not only ``reasoning_content``), usage only in a last chunk with no
    choices, and a content-less answer cut at ``length``: the recipe stage's code for each."""
    from chuixiang.upstream.chat_reader import SSEReader, StreamLimits

    reader = SSEReader(StreamLimits(first_content_s=1, idle_s=1, max_chunks=100), started=time.monotonic())
    events = [
        {"choices": [{"delta": {"reasoning": "想一想"}}]},
        {"choices": [{"delta": {"reasoning_content": "再想想"}}]},
        {"choices": [{"delta": {}, "finish_reason": "length"}]},
        {"choices": [], "usage": {"completion_tokens": 3000}},
    ]
    reader.feed(b"".join(b"data: " + json.dumps(e, ensure_ascii=False).encode() + b"\n\n" for e in events))
    out = reader.completion()
    assert (out.reasoning_chars, out.finish_reason, reader.completion_tokens) == (6, "length", 3000)
    assert reader.first_text_at is not None and reader.content_chars == 0
    with pytest.raises(EmptyAnswer, match="went to reasoning"):
        to_recipe(out)
