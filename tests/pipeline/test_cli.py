"""The ``chuixiang`` CLI as a user runs it: cook (exit codes, JSON), invoke, serve + HTTP."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.commands import run_cli
from ..support.scaled import SCALED
from ..support.serve import ROOT, Serve

pytestmark = pytest.mark.long_module  # 15 s or more in all: scheduled first (tests/conftest.py)

SCALED_ARGS = ["--parameter-overrides", *[f"{k}={v}" for k, v in SCALED.items()]]


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=timeout)


def test_cook_with_exact_scaled_override_set() -> None:
    result = run("cook", "番茄炒蛋", "--json", *SCALED_ARGS)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["status"] == "SUCCEEDED" and doc["recipe"]["name"] == "番茄炒蛋"
    assert Path(doc["image"]["url"]).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "status=RUNNING" in result.stderr  # progress goes to stderr, the document to stdout
    assert "Fatal Python error" not in result.stderr  # a child's parent watch once died at exit like that


def test_cook_against_a_model_that_refuses(fake: FakeModel) -> None:
    fake.chat_script.extend([ChatBehaviour(status=401)] * 3)
    result = run("cook", "红烧肉", "--json", "--model-base-url", fake.base_url, *SCALED_ARGS)
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    assert doc["status"] == "FAILED" and doc["error"]["code"] == "RECIPE_UPSTREAM_ERROR"
    assert doc["error"]["retryable"] is False


def test_cook_bad_dish_is_usage_error() -> None:
    result = run("cook", "\x07", "--json")
    assert result.returncode == 2
    assert json.loads(result.stdout)["error"]["code"] == "INVALID_DISH"


def test_invoke_one_function_with_its_sample_event() -> None:
    result = run("invoke", "recipe", "-e", "events/recipe.json", *SCALED_ARGS)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["ok"] is True and out["imagePrompt"]


def test_serve_answers_http() -> None:
    server = Serve(SCALED)
    try:
        base = server.base
        doc = server.cook("宫保鸡丁")
        assert doc["status"] == "SUCCEEDED"
        missing = server.http.get(f"{base}/recipes/00000000-0000-4000-8000-000000000000")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "JOB_NOT_FOUND"
        for body in (b"", b"{", b'{"dish": ""}', b'{"dish": "' + "菜".encode() * 401 + b'"}'):
            bad = server.http.post(f"{base}/recipes", content=body, headers={"content-type": "application/json"})
            assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_DISH", bad.text
    finally:
        server.stop()


def test_invoke_canary_probes_each_model_of_its_event() -> None:
    event = json.loads((ROOT / "events" / "canary.json").read_text())
    result = run("invoke", "canary", "-e", "events/canary.json", "--fake-pace-ms", "0.5", *SCALED_ARGS)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert [p["model"] for p in out["probes"]] == event["models"]
    codes = {p["model"]: p["code"] for p in out["probes"]}
    assert codes == {"fake-steady": None, "fake-late-start": None, "fake-broken-json": "RECIPE_INVALID"}
    # Each probe's figures are also per-model metrics (EMF on the function's output).
    assert '"Model":"fake-late-start"' in result.stderr and '"RecipeValid"' in result.stderr
