"""The deploy's preflight refuses a stack whose alarms would page nobody (``chuixiang ladder --account``).

moto confirms an e-mail subscription the moment it is made; SNS does not: until the address clicks the
link, ListSubscriptionsByTopic shows it as ``PendingConfirmation`` (the SNS API reference; the SDK guides'
"Initially the ARN value is pending confirmation"). So the pending case is answered by a botocore
``Stubber`` in SNS's own response shape, not by moto.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from chuixiang_local.commands.cli import main
from chuixiang_local.commands.paging import confirmed_subscriptions, deployed_topic, paging_problems

TOPIC = "arn:aws:sns:us-east-1:123456789012:chuixiang-AlarmTopic-1A2B3C"


def _sub(arn: str, protocol: str, endpoint: str) -> dict[str, str]:
    return {
        "SubscriptionArn": arn,
        "Owner": "123456789012",
        "Protocol": protocol,
        "Endpoint": endpoint,
        "TopicArn": TOPIC,
    }


def test_a_subscription_nobody_confirmed_pages_nobody() -> None:
    sns = boto3.client("sns", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(sns) as stub:
        stub.add_response(
            "list_subscriptions_by_topic",
            {
                "Subscriptions": [_sub("PendingConfirmation", "email", "oncall@example.com")],
                "NextToken": "page-2",
            },
            {"TopicArn": TOPIC},
        )
        stub.add_response(
            "list_subscriptions_by_topic",
            {
                "Subscriptions": [
                    _sub(f"{TOPIC}:0f1e2d3c", "https", "https://events.pagerduty.com/integration/k/enqueue")
                ]
            },
            {"TopicArn": TOPIC, "NextToken": "page-2"},
        )
        assert confirmed_subscriptions(sns, TOPIC) == ["https:https://events.pagerduty.com/integration/k/enqueue"]
        stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("parameters", "subscribed", "refused"),
    [
        ({}, [], True),
        ({"AlarmEmail": "", "AlarmHttpsEndpoint": ""}, [], True),
        ({"AlarmEmail": "oncall@example.com"}, [], False),
        ({"AlarmHttpsEndpoint": "https://events.pagerduty.com/integration/k/enqueue"}, [], False),
        ({}, ["lambda:arn:aws:lambda:us-east-1:123456789012:function:chatbot"], False),
    ],
)
def test_paging_is_refused_only_when_nobody_would_hear(
    parameters: dict[str, str], subscribed: list[str], refused: bool
) -> None:
    assert bool(paging_problems(parameters, subscribed)) is refused


def _stack(name: str, subscribe: str | None = None) -> str:
    template = {
        "Resources": {"AlarmTopic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {"AlarmTopicArn": {"Value": {"Ref": "AlarmTopic"}}},
    }
    cloudformation = boto3.client("cloudformation", region_name="us-east-1")
    cloudformation.create_stack(StackName=name, TemplateBody=json.dumps(template))
    topic = deployed_topic(cloudformation, name)
    assert topic
    if subscribe:
        boto3.client("sns", region_name="us-east-1").subscribe(TopicArn=topic, Protocol="sqs", Endpoint=subscribe)
    return topic


def _ladder(capsys: Any, *argv: str) -> tuple[int, str]:
    code = main(["ladder", "--account", *argv])
    return code, capsys.readouterr().err


@pytest.mark.usefixtures("in_process_aws")
def test_ladder_account_refuses_a_stack_that_pages_nobody(capsys: Any) -> None:
    _stack("quiet")
    code, err = _ladder(capsys, "--stack-name", "quiet")
    assert code == 2 and "nobody would be paged" in err, err
    # Either parameter, or --unpaged, lets it through.
    assert _ladder(capsys, "--stack-name", "quiet", "--parameter-overrides", "AlarmEmail=oncall@example.com")[0] == 0
    assert _ladder(capsys, "--stack-name", "quiet", "--unpaged")[0] == 0
    # A first deploy (no stack yet) with no paging parameter is refused too.
    code, err = _ladder(capsys, "--stack-name", "not-yet")
    assert code == 2 and "no topic yet" in err, err


@pytest.mark.usefixtures("in_process_aws")
def test_ladder_account_accepts_a_topic_someone_subscribed_by_hand(capsys: Any) -> None:
    _stack("watched", subscribe="arn:aws:sqs:us-east-1:123456789012:incidents")
    code, err = _ladder(capsys, "--stack-name", "watched")
    assert code == 0, err
    assert "1 confirmed subscriber(s)" in err
