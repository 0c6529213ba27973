"""Progress and the partial recipe while the model writes: what is shown, how often it is written, and
that a late write can never touch a job that has moved on."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest

from chuixiang import steps
from chuixiang.errors import ErrorCode
from chuixiang.generation.progress import MAX_STREAMING_PERCENT, ProgressReporter, partial_recipe
from chuixiang.generation.recipe import to_recipe
from chuixiang.generation.recipe_format import strip_reasoning
from chuixiang.job_status import JobStage, JobStatus
from chuixiang.models import RecipeEvent
from chuixiang.settings import Settings
from chuixiang.stores.jobs import JobStore, render
from chuixiang.timeouts import PROGRESS_INTERVAL
from chuixiang.upstream.chat import Completion
from chuixiang.upstream.failures import EmptyAnswer
from chuixiang_local.fake_model import ChatBehaviour, FakeModel, recipe_for
from chuixiang_local.template import Template

from .conftest import SCALED
from .serve_helper import Serve
from .stage_helpers import function_settings
from .waiting import wait_until

FINAL = recipe_for("番茄炒蛋")
TEXT = json.dumps(FINAL, ensure_ascii=False)


# --- the partial recipe (fast) ---------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["", "<think>先想想用什么食材。</think>", "```json\n"],
                         ids=["plain", "think", "fence"])
def test_partial_recipe_never_shows_what_is_still_being_written(prefix: str) -> None:
    """Every prefix of a streamed recipe: each shown field equals the final one, steps only grow."""
    text = prefix + TEXT
    shown_steps = 0
    seen: set[str] = set()
    for n in range(1, len(text) + 1):
        partial = partial_recipe(text[:n]) or {}
        for key in ("name", "summary", "ingredients"):
            if key in partial:
                assert partial[key] == FINAL[key], (n, key)  # type: ignore[literal-required]
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
    assert to_recipe(done).name == "番茄炒蛋" and done.reasoning_chars == len("<think>先想想</think>")
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
    assert waiting and waiting["percent"] == 0 and waiting["etaMs"] is None  # no rate before any text
    stream.content_chars, now[0] = 600, 110.0  # 600 chars ~ 500 tokens in 10 s: 50 tokens/s
    p = reporter.progress()
    assert p and (p["tokens"], p["percent"], p["etaMs"]) == (500, 50, 10_000)
    stream.completion_tokens = 400  # the provider's usage wins over the estimate
    p = reporter.progress()
    assert p and (p["tokens"], p["percent"], p["etaMs"]) == (400, 40, 15_000)
    stream.completion_tokens = 5000  # longer than expected: never 100 before validation
    p = reporter.progress()
    assert p and p["percent"] == MAX_STREAMING_PERCENT and p["etaMs"] == 0
    assert reporter.finished()["percent"] == 100


def test_a_failed_write_is_ignored_and_unchanged_progress_not_rewritten() -> None:
    calls: list[int] = []

    def write(progress: dict[str, Any], partial: Any) -> bool:
        calls.append(progress["chars"])
        raise RuntimeError("throttled")

    reporter = ProgressReporter(write, interval_s=1, expected_tokens=100)
    stream = FakeStream(content_chars=10, first_text_at=time.monotonic())
    reporter.watch(stream)
    assert reporter.report() and reporter.report()  # the failure is swallowed; the same state is not resent
    stream.content_chars = 20
    assert reporter.report()
    assert calls == [10, 20]


# --- through the recipe step, on a real socket, with the job in DynamoDB (moto) ----------------


class CountingTable:
    """The jobs table, counting every write the step makes."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self.writes: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.table, name)
        if name in ("put_item", "update_item", "delete_item"):
            def counted(**kwargs: Any) -> Any:
                self.writes.append(name)
                return attr(**kwargs)
            return counted
        return attr


def _recipe_step(template: Template, fake: FakeModel, table: Any, monkeypatch: pytest.MonkeyPatch,
                 stream_s: float, **chat: Any) -> tuple[JobStore, Settings, str]:
    settings = function_settings(template, "recipe", fake.base_url)
    monkeypatch.setattr(steps, "get_settings", lambda: settings)
    pieces = len(TEXT) // ChatBehaviour().chunk_chars
    fake.chat_script.append(ChatBehaviour(chunk_delay_s=stream_s / pieces, **chat))
    store = JobStore(settings, table=CountingTable(table))
    job_id = f"job-{time.monotonic_ns()}"
    store.create(job_id, "番茄炒蛋")
    store.update(job_id, status=JobStatus.RUNNING, stage=JobStage.RECIPE, dish="番茄炒蛋")
    return store, settings, job_id


def _budget(template: Template) -> float:
    return template.function_by_dir("recipe").timeout_s * 1000


@pytest.mark.sockets
def test_progress_writes_are_bounded_and_increasing(fake: FakeModel, table: Any, scaled_template: Template,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    store, settings, job_id = _recipe_step(scaled_template, fake, table, monkeypatch, stream_s=2.0)
    seen: list[dict[str, Any]] = []
    record = store.record_progress

    def spy(job: str, progress: dict[str, Any], partial: Any) -> bool:
        seen.append({"progress": progress, "partial": partial})
        return record(job, progress, partial)

    monkeypatch.setattr(store, "record_progress", spy)
    counter: CountingTable = store.table
    before = len(counter.writes)
    started = time.monotonic()
    result = steps.run_recipe(RecipeEvent(jobId=job_id, dish="番茄炒蛋"), lambda: _budget(scaled_template), store)
    duration = time.monotonic() - started
    assert result.ok

    interval_s = PROGRESS_INTERVAL.of(settings) / 1000
    chars = [s["progress"]["chars"] for s in seen]
    assert len(seen) >= 3 and chars == sorted(set(chars)), chars  # every write moved forward
    assert all(s["progress"]["percent"] < 100 for s in seen)
    assert any(s["partial"] and s["partial"].get("name") == "番茄炒蛋" for s in seen)
    # Writes of the whole recipe step: progress, plus metrics, recipe, cache and the breaker's record.
    writes = len(counter.writes) - before
    assert writes <= duration / interval_s + 5, (writes, duration)
    item = store.get(job_id)
    assert item and item["progress"]["percent"] == 100 and "partial" not in item


@pytest.mark.sockets
@pytest.mark.parametrize("terminal", [JobStatus.SUCCEEDED, JobStatus.FAILED])
def test_a_late_progress_write_never_touches_a_finished_job(terminal: JobStatus, fake: FakeModel, table: Any,
                                                            scaled_template: Template,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The first progress write is held until the job has ended; the step does not wait for it."""
    chat = {} if terminal is JobStatus.SUCCEEDED else {"kind": "error_mid"}
    store, settings, job_id = _recipe_step(scaled_template, fake, table, monkeypatch, stream_s=1.5, **chat)
    release, landed = threading.Event(), threading.Event()
    applied: list[bool] = []
    record = store.record_progress

    def held(job: str, progress: dict[str, Any], partial: Any) -> bool:
        release.wait(30)
        applied.append(record(job, progress, partial))
        landed.set()
        return False

    monkeypatch.setattr(store, "record_progress", held)
    started = time.monotonic()
    result = steps.run_recipe(RecipeEvent(jobId=job_id, dish="番茄炒蛋"), lambda: _budget(scaled_template), store)
    assert time.monotonic() - started < 3.0  # the held write did not hold the job
    assert result.ok is (terminal is JobStatus.SUCCEEDED)
    if terminal is JobStatus.SUCCEEDED:  # what Finalize does
        store.update(job_id, status=JobStatus.SUCCEEDED, stage=JobStage.DONE)
    else:  # what RecordFailure does
        store.fail(job_id, ErrorCode.RECIPE_UPSTREAM_ERROR, "mid-stream")
    release.set()
    assert landed.wait(10)
    assert applied == [False]
    item = store.get(job_id)
    assert item and item["status"] == terminal
    doc = render(item, None)
    if terminal is JobStatus.SUCCEEDED:
        assert doc.progress and doc.progress.percent == 100 and doc.partial is None
    else:
        assert doc.progress is None and doc.partial is None and doc.error is not None


# --- what a client polling `chuixiang serve` sees ----------------------------------------------


@pytest.mark.pipeline
def test_polling_serve_sees_the_recipe_being_written(scaled_template: Template) -> None:
    overrides = {**SCALED, "RecipeTotalTimeoutMs": "8000", "RecipeFunctionTimeout": "12",
                 "CanaryFunctionTimeout": "12", "StateMachineTimeout": "90"}
    serve = Serve(overrides, fake_pace_ms=12)  # ~3 s of streaming
    try:
        job_id = serve.post("番茄炒蛋")
        docs: list[dict[str, Any]] = []

        def ended() -> bool:
            docs.append(serve.get(job_id))
            return docs[-1]["status"] in ("SUCCEEDED", "FAILED")

        wait_until(ended, timeout_s=60, what="the job ended", interval_s=0.05)
    finally:
        serve.stop()
    final = docs[-1]
    assert final["status"] == "SUCCEEDED", final
    assert final["progress"]["percent"] == 100 and final.get("partial") is None
    streaming = [d for d in docs if d["status"] == "RUNNING" and d["stage"] == "recipe" and d.get("progress")]
    chars = [d["progress"]["chars"] for d in streaming]
    assert len(set(chars)) >= 3 and chars == sorted(chars), chars
    assert all(d["progress"]["percent"] < 100 for d in streaming)
    partials = [d["partial"] for d in streaming if d.get("partial")]
    assert any(p.get("name") == final["recipe"]["name"] for p in partials)
    step_counts = [len(p.get("steps", [])) for p in partials]
    assert len(set(step_counts)) >= 2 and step_counts == sorted(step_counts), step_counts
    for p in partials:  # never a half-written step
        assert p.get("steps", []) == final["recipe"]["steps"][: len(p.get("steps", []))]


def test_provider_quirks_in_the_stream() -> None:
    """Reasoning under ``reasoning`` (not only ``reasoning_content``), usage only in a last chunk with no
    choices, and a content-less answer cut at ``length``: the recipe stage's code for each."""
    from chuixiang.upstream.chat import SSEReader, StreamLimits

    reader = SSEReader(StreamLimits(first_content_s=1, idle_s=1, max_chunks=100), started=time.monotonic())
    events = [{"choices": [{"delta": {"reasoning": "想一想"}}]},
              {"choices": [{"delta": {"reasoning_content": "再想想"}}]},
              {"choices": [{"delta": {}, "finish_reason": "length"}]},
              {"choices": [], "usage": {"completion_tokens": 3000}}]
    reader.feed(b"".join(b"data: " + json.dumps(e, ensure_ascii=False).encode() + b"\n\n" for e in events))
    out = reader.out
    assert (out.reasoning_chars, out.finish_reason, reader.completion_tokens) == (6, "length", 3000)
    assert reader.first_text_at is not None and reader.content_chars == 0
    with pytest.raises(EmptyAnswer, match="went to reasoning"):
        to_recipe(out)
