"""Rolling out and being polled: functions and the state machine published and called by version, one execution
input both definitions read, a poll interval that follows the job, the poll route throttled apart."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from stack_template import REPO_ROOT

from ..support.template_doc import DOC, RESOURCES


@pytest.mark.parametrize(
    ("item", "after"),
    [
        ({"status": "PENDING"}, 5000),
        ({"status": "RUNNING", "stage": "recipe"}, 5000),  # queued or thinking: nothing to show yet
        ({"status": "RUNNING", "stage": "recipe", "progress": {"percent": 40, "etaMs": 50_000}}, 3000),
        ({"status": "RUNNING", "stage": "recipe", "progress": {"percent": 60, "etaMs": 4000}}, 1500),
        ({"status": "RUNNING", "stage": "recipe", "progress": {"percent": 92, "etaMs": None}}, 1500),
        # in sections: the outline, then each range within seconds of each other
        (
            {"status": "RUNNING", "stage": "recipe", "progress": {"percent": 10, "sections": {"outline": "writing"}}},
            1500,
        ),
        ({"status": "RUNNING", "stage": "image"}, 5000),  # the recipe is on screen
        ({"status": "RUNNING", "stage": "done"}, 1000),
        ({"status": "SUCCEEDED", "stage": "done"}, None),
        ({"status": "FAILED", "stage": "recipe"}, None),
    ],
)
def test_poll_after_follows_the_job(item: dict[str, Any], after: int | None) -> None:
    """At the template's default progress interval; at a quarter of it, a quarter of each wait (never under
    the interval's own least value)."""
    from chuixiang.job_view import render_job
    from chuixiang.polling import poll_after_ms
    from chuixiang.stores.job_item import JobItem
    from chuixiang.timeouts import PROGRESS_INTERVAL

    default = PROGRESS_INTERVAL.default
    assert default == int(DOC["Parameters"]["ProgressIntervalMs"]["Default"])
    assert poll_after_ms(item.get("status"), item.get("stage"), item.get("progress"), default) == after
    quarter = poll_after_ms(item.get("status"), item.get("stage"), item.get("progress"), default // 4)
    assert quarter == (None if after is None else after // 4)
    least = poll_after_ms(item.get("status"), item.get("stage"), item.get("progress"), PROGRESS_INTERVAL.minimum)
    assert least == (None if after is None else max(PROGRESS_INTERVAL.minimum, after // 20))
    stored = {"jobId": "j", "dish": "d", "createdAt": "2026-12-01T00:00:00.000Z", **item}
    if "progress" in item:  # a whole progress record, as the reporter writes it
        stored["progress"] = {"chars": 1, "tokens": 1, "expectedTokens": 1600, "updatedAt": "x", **item["progress"]}
    doc = render_job(JobItem.model_validate(stored), None, default)
    assert doc.pollAfterMs == after


def test_the_poll_route_is_throttled_apart_from_the_rest() -> None:
    http = RESOURCES["RecipeApi"]["Properties"]
    assert http["RouteSettings"] == {
        "ANY /recipes/{jobId}": {
            "ThrottlingBurstLimit": {"Ref": "ApiPollBurstLimit"},
            "ThrottlingRateLimit": {"Ref": "ApiPollRateLimit"},
        }
    }
    params = DOC["Parameters"]
    assert params["ApiPollRateLimit"]["Default"] > params["ApiThrottleRateLimit"]["Default"]


def test_functions_and_the_state_machine_are_published_and_called_by_version() -> None:
    machine = RESOURCES["RecipeStateMachine"]["Properties"]
    assert machine["AutoPublishAlias"] == "live" and DOC["Globals"]["Function"]["AutoPublishAlias"] == "live"
    for name in ("Submit", "Recipe", "Image"):
        assert machine["DefinitionSubstitutions"][f"{name}FunctionArn"] == {"Ref": f"{name}Function.Version"}
    api = RESOURCES["ApiFunction"]["Properties"]
    assert api["Environment"]["Variables"]["STATE_MACHINE_ARN"] == {"Fn::Sub": "${RecipeStateMachine}:live"}
    # Step Functions authorises a call on an alias against the machine's own ARN, the qualifier a condition key
    # (a Resource of "<machine>:live" matches nothing it checks: every POST would be refused on AWS).
    assert {
        "Effect": "Allow",
        "Action": "states:StartExecution",
        "Resource": {"Ref": "RecipeStateMachine"},
        "Condition": {"ForAnyValue:StringEquals": {"states:StateMachineQualifier": ["live"]}},
    } in api["Policies"][-1]["Statement"]
    functions = [r["Properties"] for r in RESOURCES.values() if r["Type"] == "AWS::Serverless::Function"]
    assert all(f.get("AutoPublishAliasAllProperties") is True for f in functions)  # a layer-only release publishes
    assert RESOURCES["SharedLayer"]["Properties"]["PublishLambdaVersion"] is True
    assert api["DeploymentPreference"] == {
        "Type": "Canary10Percent5Minutes",
        "Alarms": [{"Ref": "ApiErrorsAlarm"}, {"Ref": "Api5xxAlarm"}],
    }
    # SnapStart outside the China regions, where it is not confirmed (a create that asked for it would fail).
    assert api["SnapStart"] == {"Fn::If": ["IsChina", {"Ref": "AWS::NoValue"}, {"ApplyOn": "PublishedVersions"}]}
    assert DOC["Conditions"]["IsChina"] == {"Fn::Equals": [{"Ref": "AWS::Partition"}, "aws-cn"]}


def test_the_execution_input_is_what_both_definitions_of_a_rollout_read() -> None:
    """The api rolls out 10 % for 5 minutes: old api code starts the new definition, new code the old one. The
    input is pinned: what the api sends is exactly what the first states read; a new field must be optional
    in the definition (a Choice with IsPresent) before the api sends it, and stay so for one release."""
    from chuixiang.schemas import ExecutionInput

    asl = json.loads(
        (REPO_ROOT / "statemachine" / "recipe.asl.json").read_text().replace("${StateMachineTimeout}", "1")
    )
    first = asl["States"][asl["StartAt"]]
    read = {m.group(1) for m in re.finditer(r'"\$\.(\w+)"', json.dumps(first["Parameters"]))}
    assert set(ExecutionInput.model_fields) == read == {"jobId", "dish"}
