"""Job items (``stores/jobs.py``): what a late progress write may and may not touch."""

from __future__ import annotations

from typing import Any

from chuixiang.job_status import JobStage, JobStatus
from chuixiang.schemas import Progress
from chuixiang.settings import Settings
from chuixiang.stores.jobs import JobStore


def progress(tokens: int) -> Progress:
    return Progress(chars=tokens * 2, tokens=tokens, expectedTokens=1000, percent=10, etaMs=None, updatedAt="x")


def test_a_progress_write_after_the_recipe_stage_recorded_its_measurements_is_refused(table: Any) -> None:
    """The stage's own measurements (every call) stand: a write still in flight when the stage ended, landing
    while the job is still RUNNING in the recipe stage, no longer replaces them with the stream's figures."""
    store = JobStore(Settings(), table)
    store.create("j", "番茄炒蛋")
    store.update("j", status=JobStatus.RUNNING, stage=JobStage.RECIPE)
    assert store.record_progress("j", progress(40), {"name": "番茄炒蛋"})  # while it streams: applies
    calls = [{"model": "m", "ms": 20, "outcome": "http_error", "status": 503}]
    store.set_metrics("j", JobStage.RECIPE, {"calls": calls, "attempts": 1})
    assert store.record_progress("j", progress(80), {"name": "番茄炒蛋"}) is False  # the late one: refused
    item = store.get("j")
    assert item and item["metrics"]["recipe"]["calls"] == calls and item["progress"]["tokens"] == 40
    assert item["status"] == JobStatus.RUNNING  # the job itself moves on by the state machine only
