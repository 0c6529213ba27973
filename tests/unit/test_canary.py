"""The canary: its resources exist only when models are named, with least privilege; each run probes
every model at once with production's generation code and emits the per-model metrics."""

from __future__ import annotations

import json

import pytest
from stack_template import Template


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
    # each probe adds to its model's measured health: UpdateItem on the table, nothing else of it; no bucket
    assert statements[0] == {
        "Effect": "Allow",
        "Action": "dynamodb:UpdateItem",
        "Resource": {"Fn::GetAtt": ["JobsTable", "Arn"]},
    }
    assert statements[1] == {
        "Effect": "Allow",
        "Action": "secretsmanager:GetSecretValue",
        "Resource": {"Ref": "ModelApiKeySecretArn"},
    }
    # and kms:Decrypt on the secret's own key, only when it has one, only through Secrets Manager
    [(condition, decrypt, absent)] = [st["Fn::If"] for st in statements[2:]]
    assert condition == "HasSecretKmsKey" and decrypt["Action"] == "kms:Decrypt" and absent == {"Ref": "AWS::NoValue"}
    assert props["Environment"]["Variables"]["CANARY_MODELS"] == {"Ref": "CanaryModels"}


def test_models_by_hour_on_the_dashboard() -> None:
    template = Template()
    doc = json.loads(template.resolve(template.doc["Resources"]["Dashboard"]["Properties"]["DashboardBody"]))
    searches = [
        m[0]["expression"]
        for w in doc["widgets"]
        if w["type"] == "metric"
        for m in w["properties"]["metrics"]
        if isinstance(m[0], dict)
    ]
    for name in ("RecipeFirstContentMs", "RecipeTotalMs", "RecipeValid"):
        assert any(
            f'MetricName="{name}"' in s and "{Chuixiang,Model,service}" in s and "3600" in s for s in searches
        ), name


@pytest.mark.parametrize("canary_models", ["", "m1,m2"])
def test_every_alarm_is_on_the_dashboards_alarm_widget(canary_models: str) -> None:
    template = Template({"CanaryModels": canary_models})
    doc = json.loads(template.resolve(template.doc["Resources"]["Dashboard"]["Properties"]["DashboardBody"]))
    [widget] = [w for w in doc["widgets"] if w["type"] == "alarm"]
    alarms = {*template.deployed("AWS::CloudWatch::Alarm"), *template.deployed("AWS::CloudWatch::CompositeAlarm")}
    assert sorted(widget["properties"]["alarms"]) == sorted(template.physical[lid]["Arn"] for lid in alarms)
    assert ("CanaryErrorsAlarm" in alarms) == bool(canary_models)
