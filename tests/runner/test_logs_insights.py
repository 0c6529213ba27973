"""The Logs Insights subset the saved queries use, as the CloudWatch Logs user guide's query syntax defines it."""

from __future__ import annotations

import pytest

from chuixiang_local.logs_insights import run

ROWS = [
    {"message": "job ended", "status": "FAILED", "code": "INTERNAL", "jobId": "a", "waitedMs": 10},
    {"message": "job ended", "status": "FAILED", "code": "RECIPE_TIMEOUT", "model": "m", "jobId": "b", "waitedMs": 30},
    {"message": "job ended", "status": "FAILED", "code": "RECIPE_TIMEOUT", "model": "m", "jobId": "c", "waitedMs": 20},
    {"message": "job ended", "status": "SUCCEEDED", "code": "OK", "model": "m", "jobId": "d", "waitedMs": 5},
    {"message": "stage finished", "stage": "recipe", "recipeModel": "m", "recipeMs": 7, "correlation_id": "d"},
]


def test_filter_stats_by_sort_and_limit() -> None:
    query = """filter message = "job ended" and status = "FAILED"
        | stats count(*) as failures, latest(jobId) as lastJob, max(waitedMs) by code, model
        | sort failures desc
        | limit 1"""
    assert run(query, ROWS) == [
        {"code": "RECIPE_TIMEOUT", "model": "m", "failures": 2, "lastJob": "c", "max(waitedMs)": 30.0}
    ]


def test_ispresent_not_and_in() -> None:
    assert [r["jobId"] for r in run('filter ispresent(model) and not (code = "OK")', ROWS)] == ["b", "c"]
    assert len(run('filter message in ["stage finished", "nothing"]', ROWS)) == 1
    assert [r["jobId"] for r in run("filter waitedMs > 15 | sort waitedMs asc | fields jobId", ROWS)] == ["c", "b"]


def test_by_field_as_alias_and_an_absent_field_sorts_last() -> None:
    rows = run("stats sum(recipeMs) as ms by correlation_id as jobId | sort ms desc", ROWS)
    assert rows[0] == {"jobId": "d", "ms": 7.0} and rows[-1]["ms"] is None


def test_what_is_not_modelled_raises() -> None:
    with pytest.raises(KeyError):
        run("parse @message 'x * y' as a", ROWS)
    with pytest.raises(ValueError, match="not modelled"):
        run("stats pct(waitedMs, 50)", ROWS)
