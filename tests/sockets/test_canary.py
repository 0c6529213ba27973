"""The canary: its resources exist only when models are named, with least privilege; each run probes
every model at once with production's generation code and emits the per-model metrics."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from stack_template import Template

from chuixiang import canary
from chuixiang.schemas import CanaryEvent
from chuixiang.stores.health_store import DynamoHealthStore
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.stages import function_settings


def test_a_run_probes_every_model_at_once(
    fake: FakeModel,
    scaled_template: Template,
    table: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = function_settings(scaled_template, "canary", fake.base_url).model_copy(
        update={"canary_models": "slow-a, slow-b, broken", "jobs_table": table.name}
    )
    monkeypatch.setattr(canary, "get_settings", lambda: settings)
    slow = ChatBehaviour(headers_delay_s=1.0)
    fake.chat_by_model.update({"slow-a": slow, "slow-b": slow, "broken": ChatBehaviour(kind="garbage")})
    timeout_ms = scaled_template.function_by_dir("canary").timeout_s * 1000
    started = time.monotonic()
    result = canary.run_canary(CanaryEvent(), lambda: timeout_ms)
    elapsed = time.monotonic() - started

    assert [(p.model, p.valid, p.code) for p in result.probes] == [
        ("slow-a", True, None),
        ("slow-b", True, None),
        ("broken", False, "RECIPE_UPSTREAM_ERROR"),
    ]
    assert all(p.firstContentMs is not None and p.firstContentMs >= 1000 for p in result.probes[:2])
    # Side by side: each slow model's request arrived while the other was still in its 1 s wait (in a
    # row, the second would arrive after the first's answer). Arrival times, not the wall time, so a
    # busy machine cannot fail this.
    arrived = {model: t for _, t, model in fake.requests if model in ("slow-a", "slow-b")}
    assert abs(arrived["slow-a"] - arrived["slow-b"]) < 1.0, arrived
    assert elapsed >= 1.0
    emitted: list[dict[str, Any]] = [
        json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')
    ]
    valid = {(e["Model"], e["RecipeValid"][0]) for e in emitted if "RecipeValid" in e}
    assert valid == {("slow-a", 1.0), ("slow-b", 1.0), ("broken", 0.0)}
    # each probe added to its model's measured health, as a job's call does
    health = {m: DynamoHealthStore(table, fake.base_url, m, max_age_s=3600).read() for m in ("slow-a", "broken")}
    assert health["slow-a"].known and health["slow-a"].valid_rate == 1.0
    assert health["broken"].known and health["broken"].valid_rate is None  # it never gave an answer to judge
