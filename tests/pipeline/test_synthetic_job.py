"""The synthetic job's function, run as Lambda runs it, against ``chuixiang serve`` over a real socket: a dish
cooked through the API publishes an ``ok`` run; with the model down, the run's job and its confirming job both
end FAILED with the model's code and the run publishes ``SyntheticFailures`` 1, which SyntheticFailingAlarm
counts; an API that is not there is an ``api_error``, not a crash of the function."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from stack_template import REPO_ROOT, Template

from chuixiang.settings import get_settings
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel
from chuixiang_local.workers.context import LocalContext

from ..support.commands import run_cli
from ..support.handlers import function_module
from ..support.scaled import SCALED, WHOLE
from ..support.serve import Serve, free_port

pytestmark = pytest.mark.long_module  # 15 s or more in all: scheduled first (tests/conftest.py)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeModel]:
    with FakeModel(pace_s=0.001) as model:
        yield model


@pytest.fixture(scope="module")
def serve(fake: FakeModel) -> Iterator[Serve]:
    # The model-down test's failures must not open the breaker the other tests' jobs then meet, in any order.
    with Serve({**SCALED, **WHOLE, "BreakerFailureThreshold": "100"}, fake.base_url) as server:
        yield server


Emf = list[dict[str, Any]]


def _invoke(
    api_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], table: Any
) -> tuple[dict[str, Any], Emf]:
    """The function's handler with the environment the template gives it (``API_URL``; its lease on an
    in-process table), the scaled timeout."""
    monkeypatch.setenv("API_URL", api_url)
    monkeypatch.setenv("JOBS_TABLE", table.name)
    get_settings.cache_clear()
    timeout_s = int(SCALED["SyntheticFunctionTimeout"])
    context = LocalContext("synthetic", 128, str(uuid.uuid4()), int((time.time() + timeout_s) * 1000))
    try:
        result: dict[str, Any] = function_module("synthetic").lambda_handler({}, context)
    finally:
        get_settings.cache_clear()
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    return result, emf


def _metric(emf: list[dict[str, Any]], name: str) -> list[tuple[float, dict[str, Any]]]:
    """Each EMF document's value of ``name`` (Powertools writes a list when a value was added more than once)."""
    return [(sum(v) if isinstance(v := doc[name], list) else v, doc) for doc in emf if name in doc]


def test_a_served_dish_is_an_ok_run(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], table: Any
) -> None:
    result, emf = _invoke(serve.base, monkeypatch, capsys, table)
    [job] = result["jobs"]
    assert job["outcome"] == "ok" and job["jobId"] and not result["failing"], result
    assert serve.get(job["jobId"])["status"] == "SUCCEEDED"
    assert [value for value, _ in _metric(emf, "SyntheticFailures")] == [0]
    [(_, ok)] = _metric(emf, "SyntheticJobs")
    assert ok["Outcome"] == "ok"
    [(latency, _)] = _metric(emf, "SyntheticLatencyMs")
    assert 0 < latency <= job["ms"] + 1


def test_with_the_model_down_the_run_fails_confirmed(
    serve: Serve, fake: FakeModel, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], table: Any
) -> None:
    model = Template().parameters["RecipeModel"]
    fake.chat_by_model[model] = ChatBehaviour(status=503)
    try:
        result, emf = _invoke(serve.base, monkeypatch, capsys, table)
    finally:
        del fake.chat_by_model[model]
    assert [(j["outcome"], j["code"]) for j in result["jobs"]] == [("failed", "RECIPE_UPSTREAM_ERROR")] * 2, result
    assert result["jobs"][0]["jobId"] != result["jobs"][1]["jobId"]  # two jobs, not one joined
    assert result["failing"]
    assert [value for value, _ in _metric(emf, "SyntheticFailures")] == [1]
    assert sorted(doc["Outcome"] for _, doc in _metric(emf, "SyntheticJobs")) == ["failed", "failed"]


def test_an_api_that_is_not_there_is_an_api_error_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], table: Any
) -> None:
    result, emf = _invoke(f"http://127.0.0.1:{free_port()}", monkeypatch, capsys, table)
    assert [j["outcome"] for j in result["jobs"]] == ["api_error", "api_error"] and result["failing"]
    assert [value for value, _ in _metric(emf, "SyntheticFailures")] == [1]


def test_the_cli_runs_it_against_a_running_serve(serve: Serve) -> None:
    """The documented command: ``chuixiang invoke synthetic --api-url <serve>`` cooks a dish through it."""
    done = run_cli(
        "invoke",
        "synthetic",
        "-e",
        "events/synthetic.json",
        "--parameter-overrides",
        *[f"{k}={v}" for k, v in {**SCALED, "CanaryModels": "m"}.items()],
        "--api-url",
        serve.base,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [j["outcome"] for j in result["jobs"]] == ["ok"] and not result["failing"], result
