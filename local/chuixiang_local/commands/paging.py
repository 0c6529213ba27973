"""Whether an alarm would reach anyone: the deploy's preflight refuses a stack that pages nobody.

Every alarm notifies ``AlarmTopic``; the topic reaches a person only through a subscription. The template
makes one from ``AlarmEmail`` or ``AlarmHttpsEndpoint`` (an incident tool's URL), and an operator may have
subscribed the topic by hand (AWS Chatbot, a tool in another account). With none of these, every alarm
fires into an empty topic: the stack looks watched and is not. SNS lists a subscription that was never
confirmed (an e-mail nobody clicked) as ``PendingConfirmation``: it pages nobody either.
"""

from __future__ import annotations

from typing import Any

from chuixiang_local.commands.deploy_parameters import deployed_outputs

#: The template's parameters that subscribe a person to the alarm topic.
PAGING_PARAMETERS = ("AlarmEmail", "AlarmHttpsEndpoint")
TOPIC_OUTPUT = "AlarmTopicArn"


def deployed_topic(cloudformation: Any, stack_name: str) -> str | None:
    """The stack's alarm topic (None: no stack yet, or one deployed before the output existed)."""
    return deployed_outputs(cloudformation, stack_name).get(TOPIC_OUTPUT)


def confirmed_subscriptions(sns: Any, topic_arn: str) -> list[str]:
    """The endpoints subscribed to the topic that confirmed (a pending one has no ARN yet)."""
    pages = sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=topic_arn)
    return [
        f"{sub['Protocol']}:{sub['Endpoint']}"
        for page in pages
        for sub in page.get("Subscriptions", [])
        if sub.get("SubscriptionArn", "").startswith("arn:")
    ]


def paging_problems(parameters: dict[str, str], subscribed: list[str]) -> list[str]:
    """Empty when the deploy subscribes someone or someone already confirmed; else why nobody is paged."""
    if any(parameters.get(name) for name in PAGING_PARAMETERS) or subscribed:
        return []
    return [
        "nobody would be paged: AlarmTopic has no confirmed subscriber and this deploy sets neither AlarmEmail "
        'nor AlarmHttpsEndpoint - set one (make deploy PARAMS="... AlarmEmail=oncall@example.com"), or subscribe your '
        "incident tool to the stack's AlarmTopicArn output; to deploy a stack nobody watches, make deploy UNPAGED=1"
    ]
