"""The canary: its resources exist only when models are named, with least privilege; each run probes
every model at once with production's generation code and emits the per-model metrics."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from chuixiang import steps
from chuixiang.models import CanaryEvent
from chuixiang_local.fake_model import ChatBehaviour, FakeModel
from chuixiang_local.template import Template

from .stage_helpers import function_settings


def test_canary_resources_are_conditional_and_least_privilege() -> None:
    template = Template()
    params = template.doc["Parameters"]
    assert params["CanaryModels"]["Default"] == "" and params["CanarySchedule"]["Default"] == "rate(1 hour)"
    assert template.doc["Conditions"]["HasCanary"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "CanaryModels"}, ""]}]}
    canary = template.doc["Resources"]["CanaryFunction"]
    assert canary["Condition"] == "HasCanary"  # SAM gives the generated schedule and role the same condition
    props = canary["Properties"]
    assert props["Timeout"] == {"Ref": "CanaryFunctionTimeout"}
    [event] = props["Events"].values()
    assert event["Type"] == "ScheduleV2" and event["Properties"]["ScheduleExpression"] == {"Ref": "CanarySchedule"}
    statements = [st for policy in props["Policies"] for st in policy["Statement"]]
    assert statements[0] == {"Effect": "Allow", "Action": "secretsmanager:GetSecretValue",
                             "Resource": {"Ref": "ModelApiKeySecretArn"}}  # no table, no bucket
    # and kms:Decrypt on the secret's own key, only when it has one, only through Secrets Manager
    [(condition, decrypt, absent)] = [st["Fn::If"] for st in statements[1:]]
    assert condition == "HasSecretKmsKey" and decrypt["Action"] == "kms:Decrypt" and absent == {"Ref": "AWS::NoValue"}
    assert props["Environment"]["Variables"]["CANARY_MODELS"] == {"Ref": "CanaryModels"}


def test_models_by_hour_on_the_dashboard() -> None:
    body = Template().doc["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    doc = json.loads(re.sub(r"\$\{[^}]+\}", "1", body))
    searches = [m[0]["expression"] for w in doc["widgets"] if w["type"] == "metric"
                for m in w["properties"]["metrics"] if isinstance(m[0], dict)]
    for name in ("RecipeFirstContentMs", "RecipeTotalMs", "RecipeValid"):
        assert any(f'MetricName="{name}"' in s and "{Chuixiang,Model,service}" in s and "3600" in s
                   for s in searches), name


@pytest.mark.sockets
def test_a_run_probes_every_model_at_once(fake: FakeModel, scaled_template: Template,
                                          monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    settings = function_settings(scaled_template, "canary", fake.base_url).model_copy(
        update={"canary_models": "slow-a, slow-b, broken"})
    monkeypatch.setattr(steps, "get_settings", lambda: settings)
    slow = ChatBehaviour(headers_delay_s=1.0)
    fake.chat_by_model.update({"slow-a": slow, "slow-b": slow, "broken": ChatBehaviour(kind="garbage")})
    timeout_ms = scaled_template.function_by_dir("canary").timeout_s * 1000
    started = time.monotonic()
    result = steps.run_canary(CanaryEvent(), lambda: timeout_ms)
    elapsed = time.monotonic() - started

    assert [(p.model, p.valid, p.code) for p in result.probes] == [
        ("slow-a", True, None), ("slow-b", True, None), ("broken", False, "RECIPE_UPSTREAM_ERROR")]
    assert all(p.firstContentMs is not None and p.firstContentMs >= 1000 for p in result.probes[:2])
    # Side by side: each slow model's request arrived while the other was still in its 1 s wait (in a
    # row, the second would arrive after the first's answer). Arrival times, not the wall time, so a
    # busy machine cannot fail this.
    arrived = {model: t for _, t, model in fake.requests if model in ("slow-a", "slow-b")}
    assert abs(arrived["slow-a"] - arrived["slow-b"]) < 1.0, arrived
    assert elapsed >= 1.0
    emitted: list[dict[str, Any]] = [json.loads(line) for line in capsys.readouterr().out.splitlines()
                                     if line.startswith('{"_aws"')]
    valid = {(e["Model"], e["RecipeValid"][0]) for e in emitted if "RecipeValid" in e}
    assert valid == {("slow-a", 1.0), ("slow-b", 1.0), ("broken", 0.0)}
