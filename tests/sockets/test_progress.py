"""Progress and the partial recipe while the model writes: what is shown, how often it is written, and
that a late write can never touch a job that has moved on."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from model_samples import recipe_for
from stack_template import Template

from chuixiang import steps
from chuixiang.errors import ErrorCode
from chuixiang.job_status import JobStage, JobStatus
from chuixiang.job_view import render_job
from chuixiang.schemas import Progress, RecipeEvent
from chuixiang.settings import Settings
from chuixiang.stores.jobs import JobStore
from chuixiang.stores.recipe_cache import RecipeCache
from chuixiang.timeouts import PROGRESS_INTERVAL
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.stages import function_settings
from ..support.waiting import wait_until

FINAL = recipe_for("番茄炒蛋")
TEXT = json.dumps(FINAL, ensure_ascii=False)


# --- the partial recipe (fast) ---------------------------------------------------------------


# --- the progress figures (fast) -------------------------------------------------------------


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


def _recipe_step(
    template: Template, fake: FakeModel, table: Any, monkeypatch: pytest.MonkeyPatch, stream_s: float, **chat: Any
) -> tuple[JobStore, Settings, str]:
    settings = function_settings(template, "recipe", fake.base_url)
    monkeypatch.setattr(steps, "get_settings", lambda: settings)
    pieces = len(TEXT) // ChatBehaviour().chunk_chars
    fake.chat_script.append(ChatBehaviour(chunk_delay_s=stream_s / pieces, **chat))
    store = JobStore(settings, table=CountingTable(table))  # type: ignore[arg-type]  # the table, counting
    job_id = f"job-{time.monotonic_ns()}"
    store.create(job_id, "番茄炒蛋")
    store.update(job_id, status=JobStatus.RUNNING, stage=JobStage.RECIPE, dish="番茄炒蛋")
    return store, settings, job_id


def _budget(template: Template) -> float:
    return template.function_by_dir("recipe").timeout_s * 1000


def test_progress_writes_are_bounded_and_increasing(
    fake: FakeModel, table: Any, scaled_template: Template, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Half the scaled 3 s a call may take (at 2 s a busy machine's fresh-clone CI timed the call out): six
    # progress intervals, enough to see the writes bounded and increasing.
    store, settings, job_id = _recipe_step(scaled_template, fake, table, monkeypatch, stream_s=1.5)
    seen: list[dict[str, Any]] = []
    record = store.record_progress

    def spy(job: str, progress: Progress, partial: Any) -> bool:
        seen.append({"progress": progress, "partial": partial})
        return record(job, progress, partial)

    monkeypatch.setattr(store, "record_progress", spy)
    counter: CountingTable = store.table  # type: ignore[assignment]
    before = len(counter.writes)
    started = time.monotonic()
    result = steps.run_recipe(RecipeEvent(jobId=job_id, dish="番茄炒蛋"), lambda: _budget(scaled_template), store)
    duration = time.monotonic() - started
    assert result.ok

    interval_s = PROGRESS_INTERVAL.of(settings) / 1000
    chars = [s["progress"].chars for s in seen]
    assert len(set(chars)) >= 3 and chars == sorted(chars), chars  # never backwards (a repeat is a heartbeat)
    assert all(s["progress"].percent < 100 for s in seen)
    assert any(s["partial"] and s["partial"].get("name") == "番茄炒蛋" for s in seen)
    # Writes of the whole recipe step: progress, plus metrics, recipe, cache and the breaker's record.
    writes = len(counter.writes) - before
    assert writes <= duration / interval_s + 5, (writes, duration)
    item = store.get(job_id)
    assert item and item["progress"]["percent"] == 100 and "partial" not in item


@pytest.mark.parametrize("terminal", [JobStatus.SUCCEEDED, JobStatus.FAILED])
def test_a_late_progress_write_never_touches_a_finished_job(
    terminal: JobStatus, fake: FakeModel, table: Any, scaled_template: Template, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first progress write is held until the job has ended; the step does not wait for it."""
    chat = {} if terminal is JobStatus.SUCCEEDED else {"kind": "error_mid"}
    store, _settings, job_id = _recipe_step(scaled_template, fake, table, monkeypatch, stream_s=1.5, **chat)
    release, landed = threading.Event(), threading.Event()
    applied: list[bool] = []
    record = store.record_progress

    def held(job: str, progress: Progress, partial: Any) -> bool:
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
    item = store.read(job_id)
    assert item and item.status == terminal
    doc = render_job(item, None, PROGRESS_INTERVAL.default)
    if terminal is JobStatus.SUCCEEDED:
        assert doc.progress and doc.progress.percent == 100 and doc.partial is None
    else:
        assert doc.progress is None and doc.partial is None and doc.error is not None


# --- what a client polling `chuixiang serve` sees ----------------------------------------------


def test_a_job_that_moved_on_closes_the_model_call_within_one_interval(
    fake: FakeModel, table: Any, scaled_template: Template, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reconciler fails the job mid-stream: the next progress write does not apply, the stage closes the
    model's connection within one progress interval (plus a second), records ``cancelled`` and writes no
    recipe and no cache (before: it streamed the rest and then wrote and cached it)."""
    store, settings, job_id = _recipe_step(scaled_template, fake, table, monkeypatch, stream_s=10.0)
    interval_s = PROGRESS_INTERVAL.of(settings) / 1000
    failed_at: list[float] = []

    def reconcile_mid_stream() -> None:
        wait_until(lambda: bool((store.get(job_id) or {}).get("progress")), timeout_s=10, what="the model is writing")
        failed_at.append(time.monotonic())
        store.fail(job_id, ErrorCode.JOB_TIMED_OUT, "reconciled")

    reconciler = threading.Thread(target=reconcile_mid_stream)
    reconciler.start()
    result = steps.run_recipe(RecipeEvent(jobId=job_id, dish="番茄炒蛋"), lambda: _budget(scaled_template), store)
    ended = time.monotonic()
    reconciler.join()
    assert not result.ok
    assert ended - failed_at[0] < interval_s + 1.0, (ended - failed_at[0], interval_s)
    wait_until(lambda: bool(fake.hung_up), timeout_s=5, what="the model saw the connection closed")
    assert fake.hung_up[0][1] - failed_at[0] < interval_s + 1.0
    item = store.get(job_id)
    assert item and item["status"] == JobStatus.FAILED and item["error"]["code"] == "JOB_TIMED_OUT"
    assert "recipe" not in item and RecipeCache(settings, store.table).get("番茄炒蛋") is None
    assert item["metrics"]["recipe"]["calls"][-1]["outcome"] == "cancelled"
    assert fake.count("/chat/completions") == 1  # no retry, no fallback
