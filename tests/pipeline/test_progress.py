"""Progress and the partial recipe while the model writes: what is shown, how often it is written, and
that a late write can never touch a job that has moved on."""

from __future__ import annotations

import json
from typing import Any

import pytest
from model_samples import recipe_for
from stack_template import Template

from ..support.scaled import SCALED
from ..support.serve import Serve
from ..support.waiting import wait_until

# Waits on its scaled limits more than it computes (~3.4 s of CPU in ~6.0 s alone): the waiting lane's.
pytestmark = pytest.mark.waiting

FINAL = recipe_for("番茄炒蛋")
TEXT = json.dumps(FINAL, ensure_ascii=False)


# --- the partial recipe (fast) ---------------------------------------------------------------


# --- the progress figures (fast) -------------------------------------------------------------


# --- through the recipe step, on a real socket, with the job in DynamoDB (moto) ----------------


# --- what a client polling `chuixiang serve` sees ----------------------------------------------


def test_polling_serve_sees_the_recipe_being_written(scaled_template: Template) -> None:
    overrides = {
        **SCALED,
        "RecipeTotalTimeoutMs": "8000",
        "RecipeFunctionTimeout": "12",
        "CanaryFunctionTimeout": "12",
        "StateMachineTimeout": "90",
    }
    serve = Serve(overrides, fake_pace_ms=40)  # ~2 s of streaming (the outline, then its sections side by side)
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
    final_steps = {step["order"]: step for step in final["recipe"]["steps"]}
    for p in partials:  # never a half-written step; written in sections, a later range may land first
        assert all(step == final_steps[step["order"]] for step in p.get("steps", [])), p["steps"]
