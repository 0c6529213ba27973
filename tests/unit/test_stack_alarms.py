"""The operations alarms: someone is told, what the job metrics cannot see is covered, one cause pages once (a
model outage naming its cause), the canary is never retried, and the reconciler's rule keeps what it could
not deliver."""

from __future__ import annotations

import json

import pytest

from ..support.template_doc import RESOURCES


def test_alarms_can_notify() -> None:
    """An SNS topic under alias/aws/sns drops every CloudWatch alarm: the topic's key must let CloudWatch use it."""
    topic = RESOURCES["AlarmTopic"]["Properties"]
    assert topic["KmsMasterKeyId"] == {"Ref": "AlarmTopicKey"}
    key = RESOURCES["AlarmTopicKey"]
    assert key["Type"] == "AWS::KMS::Key" and key["Properties"]["EnableKeyRotation"] is True
    statements = key["Properties"]["KeyPolicy"]["Statement"]
    cloudwatch = next(s for s in statements if s["Principal"] == {"Service": "cloudwatch.amazonaws.com"})
    assert {"kms:Decrypt", "kms:GenerateDataKey*"} <= set(cloudwatch["Action"])
    alarms = {lid: r for lid, r in RESOURCES.items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    composites = [r for r in RESOURCES.values() if r["Type"] == "AWS::CloudWatch::CompositeAlarm"]
    rules = json.dumps([r["Properties"]["AlarmRule"] for r in composites])
    paging = [r for r in [*alarms.values(), *composites] if "AlarmActions" in r["Properties"]]
    assert paging and composites
    for r in paging:  # a paging alarm pages a topic (a P3 the ticket one), and says when it is over
        assert r["Properties"]["AlarmActions"] == r["Properties"]["OKActions"]
        assert r["Properties"]["AlarmActions"] in ([{"Ref": "AlarmTopic"}], [{"Ref": "TicketTopic"}])
    assert RESOURCES["TicketTopic"]["Properties"]["KmsMasterKeyId"] == {"Ref": "AlarmTopicKey"}
    for lid, r in alarms.items():  # one that does not page says so, or is a condition of one that does
        if "AlarmActions" not in r["Properties"]:
            assert f"{lid}.Arn" in rules or "Does not page" in r["Properties"]["AlarmDescription"], lid


def test_the_canary_is_never_retried() -> None:
    canary = RESOURCES["CanaryFunction"]["Properties"]
    assert canary["EventInvokeConfig"]["MaximumRetryAttempts"] == 0  # Lambda's async retries
    assert canary["Events"]["Hourly"]["Properties"]["RetryPolicy"]["MaximumRetryAttempts"] == 0  # the scheduler's


def test_the_reconciler_rule_keeps_what_it_could_not_deliver_and_says_so() -> None:
    rule = RESOURCES["ReconcileFunction"]["Properties"]["Events"]["ExecutionEnded"]["Properties"]
    assert rule["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": ["ReconcileDeadLetterQueue", "Arn"]}}
    [allow] = RESOURCES["ReconcileDeadLetterQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert allow["Principal"] == {"Service": "events.amazonaws.com"} and allow["Action"] == "sqs:SendMessage"
    # Only this rule may send (it matched every rule named <stack>-*, any other rule of the stack too).
    assert allow["Condition"] == {
        "ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": ["ReconcileFunctionExecutionEnded", "Arn"]}}
    }
    alarm = RESOURCES["ReconcileDeliveryFailedAlarm"]["Properties"]
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": ["ReconcileDeadLetterQueue", "QueueName"]}}
    ]


def test_operations_alarms_cover_what_the_job_metrics_cannot_see() -> None:
    """Lambda errors and throttles per function, API 5xx, executions aborted or throttled, and a job-failure
    rate that counts Lambda timeouts and crashes too (the recipe stage's own RecipeFailed misses them)."""
    alarms = {name: r["Properties"] for name, r in RESOURCES.items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    for fn in ("ApiFunction", "SubmitFunction", "RecipeFunction", "ImageFunction", "ReconcileFunction"):
        for metric in ("Errors", "Throttles"):
            alarm = alarms[f"{fn.removesuffix('Function')}{metric}Alarm"]
            assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/Lambda", metric)
            assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": fn}}]
    rule = alarms["ReconcileRuleFailedInvocationsAlarm"]
    assert (rule["Namespace"], rule["MetricName"]) == ("AWS/Events", "FailedInvocations")
    assert rule["Dimensions"] == [{"Name": "RuleName", "Value": {"Ref": "ReconcileFunctionExecutionEnded"}}]
    assert alarms["Api5xxAlarm"]["MetricName"] == "5xx"
    assert alarms["Api5xxAlarm"]["Dimensions"][0] == {"Name": "ApiId", "Value": {"Ref": "RecipeApi"}}
    watched = {
        m["MetricStat"]["Metric"]["MetricName"]
        for m in alarms["ExecutionsAbortedOrThrottledAlarm"]["Metrics"]
        if "MetricStat" in m
    }
    assert watched == {"ExecutionsAborted", "ExecutionThrottled"}
    for window in ("1h", "5m", "6h", "1h6x"):  # the success SLO counts every way an execution ends badly
        burn = alarms[f"JobSuccessBurn{window}Alarm"]
        counted = {m["MetricStat"]["Metric"]["MetricName"] for m in burn["Metrics"] if "MetricStat" in m}
        assert counted == {"ExecutionsSucceeded", "ExecutionsFailed", "ExecutionsTimedOut", "ExecutionsAborted"}
    covered = [
        f"{fn}{m}Alarm" for fn in ("Api", "Submit", "Recipe", "Image", "Reconcile") for m in ("Errors", "Throttles")
    ]
    covered += [
        "ReconcileRuleFailedInvocationsAlarm",
        "Api5xxAlarm",
    ]
    composites = {k: r for k, r in RESOURCES.items() if r["Type"] == "AWS::CloudWatch::CompositeAlarm"}
    paging_rules = json.dumps(
        [r["Properties"]["AlarmRule"] for r in composites.values() if "AlarmActions" in r["Properties"]]
    )
    for name in covered:  # each of them pages, itself or as a condition of a composite that pages
        assert alarms[name].get("AlarmActions") == [{"Ref": "AlarmTopic"}] or f"{name}.Arn" in paging_rules, name
    for objective in ("JobSuccessBurnAlarm", "JobLatencyBurnAlarm", "JobsEndedOutsideTheWorkflowAlarm"):
        assert composites[objective]["Properties"]["AlarmActions"] == [{"Ref": "AlarmTopic"}]


@pytest.mark.parametrize(
    ("composite", "parts"),
    [
        ("ApiFailingAlarm", ["ApiErrorsAlarm", "ApiThrottlesAlarm", "Api5xxAlarm"]),
        (
            "ReconcilerFailingAlarm",
            [
                "ReconcileRuleFailedInvocationsAlarm",
                "ReconcileDeliveryFailedAlarm",
                "ReconcileErrorsAlarm",
                "ReconcileThrottlesAlarm",
            ],
        ),
    ],
)
def test_alarms_one_cause_fires_together_page_once(composite: str, parts: list[str]) -> None:
    """A crashing api function is also API Gateway's 5xx; an event EventBridge could not deliver is a failed
    invocation and a dead-letter message: the parts do not page, their composite does (OR of them)."""
    rule = RESOURCES[composite]["Properties"]["AlarmRule"]["Fn::Sub"]
    assert rule == " OR ".join(f'ALARM("${{{part}.Arn}}")' for part in parts)
    topic = "TicketTopic" if composite == "ReconcilerFailingAlarm" else "AlarmTopic"  # a P3: a ticket
    assert RESOURCES[composite]["Properties"]["AlarmActions"] == [{"Ref": topic}]
    for part in parts:
        props = RESOURCES[part]["Properties"]
        assert "AlarmActions" not in props and "OKActions" not in props, part
        assert props["AlarmDescription"].startswith(f"Does not page on its own (part of {composite}"), part


def test_a_model_outage_pages_once_naming_its_cause() -> None:
    """An open breaker with failing recipe stages is one cause that fires three alarms: the outage composite
    names it and puts the success burn in ALARM, which pages once, whichever is seen first (a suppressor paged
    twice when the burn was seen first; tests/pipeline/test_alarm_week.py measures it)."""
    outage = RESOURCES["ModelOutageAlarm"]["Properties"]
    assert outage["AlarmRule"] == {
        "Fn::Sub": 'ALARM("${BreakerOpenAlarm.Arn}") AND ALARM("${RecipeFailureRateAlarm.Arn}")'
    }
    for part in ("ModelOutageAlarm", "BreakerOpenAlarm", "RecipeFailureRateAlarm"):
        assert "AlarmActions" not in RESOURCES[part]["Properties"], part
    burn = RESOURCES["JobSuccessBurnAlarm"]["Properties"]
    assert 'OR ALARM("${ModelOutageAlarm.Arn}") OR' in burn["AlarmRule"]["Fn::Sub"]
    assert burn["AlarmActions"] == [{"Ref": "AlarmTopic"}]
