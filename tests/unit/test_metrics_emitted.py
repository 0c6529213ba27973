"""What the stages emit, counted: one ``RecipeCalls`` per model call (the review saw two: 4 calls, 8 EMF
documents), and a job's end as the on-call's golden signals. In-process, the EMF read from stdout."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from chuixiang import stage_report
from chuixiang.clock import iso, now_utc
from chuixiang.job_status import JobStage
from chuixiang.observability import logger, metrics
from chuixiang.schemas import RecipeMetrics, UpstreamCall
from chuixiang.settings import Settings


class _Store:
    def set_metrics(self, job_id: str, stage: str, figures: dict[str, Any]) -> None:
        pass


def _emf(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{") and '"_aws"' in line]


def _named(docs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [d for d in docs if any(m["Name"] == name for x in d["_aws"]["CloudWatchMetrics"] for m in x["Metrics"])]


def test_a_recipe_stage_emits_one_recipe_calls_per_call(capsys: pytest.CaptureFixture[str]) -> None:
    m = RecipeMetrics(
        attempts=2,
        model="primary",
        calls=[
            UpstreamCall(model="primary", ms=900, outcome="http_error", status=503),
            UpstreamCall(model="primary", ms=80_000, outcome="ok", status=200, completionTokens=1600),
        ],
        totalMs=81_000,
    )
    stage_report.recipe_model_metrics(m, valid=True)  # what run_recipe does once its generation ended…
    stage_report.record_stage_outcome(_Store(), "job", JobStage.RECIPE, "Recipe", m, None)  # type: ignore[arg-type]
    metrics.flush_metrics()
    calls = _named(_emf(capsys.readouterr().out), "RecipeCalls")
    assert [(d["Model"], d["Outcome"]) for d in calls] == [("primary", "http_error"), ("primary", "ok")]


def test_a_jobs_end_is_counted_once_by_status_and_code_with_what_the_user_waited(
    capsys: pytest.CaptureFixture[str], table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``JobsEnded`` once per job, whoever ends it: the first to claim the count emits it, as the job item says
    it ended (a job an operator stopped stays JOB_STOPPED whatever the stage still running says after it);
    ``JobLatencyMs`` from the POST (``createdAt``)."""
    from chuixiang.errors import ErrorCode
    from chuixiang.stores.jobs import JobStore

    store = JobStore(Settings.model_validate({}), table)
    store.create("timed-out", "菜", createdAt=iso(now_utc() - timedelta(seconds=42)))
    stage_report.count_job_end(store, "timed-out", "RECIPE_TIMEOUT")
    docs = _emf(capsys.readouterr().out)
    ended, waited = _named(docs, "JobsEnded"), _named(docs, "JobLatencyMs")
    assert [(d["Status"], d["Code"]) for d in ended] == [("FAILED", "RECIPE_TIMEOUT")]
    assert waited[0]["Status"] == "FAILED" and waited[0]["JobLatencyMs"][0] == pytest.approx(42_000, abs=2000)
    stage_report.count_job_end(store, "timed-out", "RECIPE_TIMEOUT")  # the same end seen twice: counted once
    stage_report.count_job_end(store, "timed-out", None)
    assert _named(_emf(capsys.readouterr().out), "JobsEnded") == []
    store.create("stopped", "菜")
    store.fail("stopped", ErrorCode.JOB_STOPPED, "execution ABORTED")
    # The stage, cancelled by the stop, reports its model, then counts before the reconciler does.
    store.update("stopped", only_if_active=False, metrics={"recipe": {"model": "gpt-6-luna"}})
    said: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(logger, "info", lambda message, extra: said.append((message, extra)))
    stage_report.count_job_end(store, "stopped", "RECIPE_TIMEOUT")
    assert [(d["Status"], d["Code"]) for d in _named(_emf(capsys.readouterr().out), "JobsEnded")] == [
        ("FAILED", "JOB_STOPPED")
    ]
    ended = [extra for message, extra in said if message == "job ended"]
    assert [(e["code"], e["model"]) for e in ended] == [("JOB_STOPPED", None)]  # a stop is never a model's
    store.create("served", "菜")
    stage_report.count_job_end(store, "served", None)  # the image stage: Finalize makes it SUCCEEDED next
    assert [(d["Status"], d["Code"]) for d in _named(_emf(capsys.readouterr().out), "JobsEnded")] == [
        ("SUCCEEDED", "OK")
    ]


def test_first_content_that_never_came_is_counted_at_the_time_waited(capsys: pytest.CaptureFixture[str]) -> None:
    """A model that sent nothing for the whole first-content limit: its p90 must see that wait, not only the
    calls that were fast enough to have a first content."""
    m = RecipeMetrics(
        attempts=2,
        model="fallback",
        calls=[
            UpstreamCall(model="primary", ms=60_000, outcome="first_content_timeout"),
            UpstreamCall(model="fallback", ms=30_000, outcome="ok", status=200, completionTokens=1600),
        ],
        firstContentMs=4_000,
        totalMs=90_000,
    )
    stage_report.recipe_model_metrics(m, valid=True)
    first = _named(_emf(capsys.readouterr().out), "RecipeFirstContentMs")
    assert sorted((d["Model"], d["RecipeFirstContentMs"][0]) for d in first) == [("fallback", 4000), ("primary", 60000)]
