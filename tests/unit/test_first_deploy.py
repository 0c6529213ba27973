"""What would break the first deploy to a real account, or production after it: each item of that review
checked here as far as it can be without AWS (the template, the ASL, the Makefile, the CLI)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from chuixiang_local.commands.ladder import account_concurrency, build_ladder, reservation_problems
from chuixiang_local.template import ConfigError, Template

from ..support.serve import ROOT
from ..support.template_doc import DOC, RESOURCES, walk

# --- would break the deploy ------------------------------------------------------------------------


def test_reserved_concurrency_is_optional() -> None:
    assert DOC["Parameters"]["RecipeReservedConcurrency"]["Default"] == 0
    assert DOC["Conditions"]["HasReservedConcurrency"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "RecipeReservedConcurrency"}, 0]}]
    }
    for name in ("RecipeFunction", "ImageFunction"):
        assert RESOURCES[name]["Properties"]["ReservedConcurrentExecutions"] == {
            "Fn::If": ["HasReservedConcurrency", {"Ref": "RecipeReservedConcurrency"}, {"Ref": "AWS::NoValue"}]
        }
    # The API still admits no more jobs than RecipeConcurrency, reserved or not.
    assert RESOURCES["ApiFunction"]["Properties"]["Environment"]["Variables"]["ADMISSION_SLOTS"] == {
        "Ref": "RecipeConcurrency"
    }


def test_reserved_concurrency_is_checked_against_admission_and_the_account_quota() -> None:
    assert reservation_problems(Template()) == []  # none reserved: nothing to check
    whole = {"RecipeSections": "whole", "RecipeConcurrency": "20"}
    assert build_ladder(Template({"RecipeReservedConcurrency": "20", **whole})).ok
    below = build_ladder(Template({"RecipeReservedConcurrency": "5", **whole}))
    assert not below.ok and any("below the 20 jobs admission lets run" in f for f in below.failures())
    # Admission counts jobs in every mode (a job in sections borrows its extra streams from the key, not from
    # admission): 100 jobs by default, which 100 reserved hold and 9 do not; the key's stated quota caps them.
    assert build_ladder(Template({"RecipeReservedConcurrency": "100", "RecipeSections": "parallel"})).ok
    assert not build_ladder(Template({"RecipeReservedConcurrency": "9", "RecipeSections": "parallel"})).ok
    assert build_ladder(Template({"RecipeReservedConcurrency": "9", "RecipeKeyStreams": "9"})).ok
    new_account = reservation_problems(Template({"RecipeReservedConcurrency": "20", **whole}), account_limit=50)
    assert len(new_account) == 2 and "leaves 10 of the account's concurrency quota 50" in new_account[0]
    assert "cannot hold 32 at the peak" in new_account[1]  # the API's peak alone: (20 + 300)/s x 0.1 s
    twenty = Template({"RecipeReservedConcurrency": "20", **whole})
    assert reservation_problems(twenty, 1000, already_reserved=870) != []  # 90 left unreserved
    assert reservation_problems(twenty, 1000, already_reserved=860) == []  # 100 left
    # Unreserved, the quota holds the admitted jobs and the API's peak together: 100 + 32 on the defaults.
    assert reservation_problems(Template(), 132) == [] and len(reservation_problems(Template(), 131)) == 1
    assert "cannot hold 132 at the peak: 100 admitted jobs" in reservation_problems(Template(), 10)[0]


def test_the_account_quota_throttles_as_lambda_does() -> None:
    from chuixiang_local.cloud.concurrency import AccountConcurrency

    account = AccountConcurrency(quota=200, reserved={"recipe": 50}, outside=lambda: 30)
    assert [account.acquire("recipe") for _ in range(51)].count(True) == 50  # its reservation, no more
    assert [account.acquire("submit") for _ in range(121)].count(True) == 120  # 150 unreserved, 30 for the api
    assert account.throttles == {"recipe": 1, "submit": 1}
    account.release("submit")
    assert account.acquire("image")  # one freed: the unreserved pool is shared
    with pytest.raises(ConfigError, match="minimum value"):
        AccountConcurrency(quota=10, reserved={"recipe": 1})  # a new account cannot reserve at all


def test_the_account_quota_is_read_as_lambda_reports_it() -> None:
    client = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_response(
            "get_account_settings",
            {
                "AccountLimit": {
                    "TotalCodeSize": 80530636800,
                    "CodeSizeUnzipped": 262144000,
                    "CodeSizeZipped": 52428800,
                    "ConcurrentExecutions": 10,
                    "UnreservedConcurrentExecutions": 10,
                },
                "AccountUsage": {"TotalCodeSize": 0, "FunctionCount": 0},
            },
        )
        assert account_concurrency(client) == (10, 0)


def test_every_named_resource_is_named_per_stack() -> None:
    """Two stacks in one account and region must not collide: a fixed name is a second deploy's failure."""
    name_keys = re.compile(
        r"\.(Name|LogGroupName|TopicName|TableName|BucketName|QueueName|FunctionName|RuleName|"
        r"StateMachineName|ScheduleName|AlarmName|DashboardName|KeyAlias|AliasName)$"
    )
    for logical, resource in RESOURCES.items():
        properties = resource.get("Properties", {})
        for path, _ in walk(properties):
            key = path.split(".")[-1].split("[")[0]
            if not name_keys.search(f".{key}") or ".Dimensions" in path or "MetricName" in path:
                continue
            parent = properties
            for part in re.findall(r"[^.\[\]]+", path)[:-1]:
                parent = parent[int(part)] if isinstance(parent, list) else parent[part]
            value = parent[key]
            if isinstance(value, dict) and set(value) & {"Ref", "Fn::GetAtt"}:
                continue  # a reference to another resource's name, not a name
            assert "AWS::StackName" in json.dumps(value), f"{logical}{path} = {value}"
    canary = RESOURCES["CanaryFunction"]["Properties"]["Events"]["Hourly"]["Properties"]
    assert canary["Name"] == {"Fn::Sub": "${AWS::StackName}-canary"}


def test_make_deploy_installs_the_cli_before_running_it() -> None:
    deploy = next(line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("deploy:"))
    assert "$(STAMP)" in deploy.split(":", 1)[1]  # the ladder runs .venv/bin/chuixiang
    recipe = (ROOT / "Makefile").read_text().split("\ndeploy:", 1)[1]
    assert "chuixiang ladder --account --deployed" in recipe


# --- would break in production ---------------------------------------------------------------------


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


@pytest.mark.parametrize(
    ("arn", "ok"),
    [
        ("arn:aws:secretsmanager:us-east-1:123456789012:secret:chuixiang/model-api-key-AbC123", True),
        ("arn:aws-cn:secretsmanager:cn-north-1:123456789012:secret:chuixiang/model-api-key-xYz789", True),
        ("arn:aws:secretsmanager:us-east-1:123456789012:secret:chuixiang/model-api-key", False),  # no suffix
        ("arn:aws:secretsmanager:us-east-1:123456789012:secret:chuixiang/model-api-key-*", False),
        ("chuixiang/model-api-key", False),
    ],
)
def test_the_secret_arn_must_carry_its_random_suffix(arn: str, ok: bool) -> None:
    pattern = DOC["Parameters"]["ModelApiKeySecretArn"]["AllowedPattern"]
    assert bool(re.fullmatch(pattern, arn)) is ok


def test_a_secret_under_a_customer_key_can_be_decrypted() -> None:
    pattern = DOC["Parameters"]["ModelApiKeyKmsKeyArn"]["AllowedPattern"]
    assert re.fullmatch(pattern, "") and re.fullmatch(
        pattern, "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    )
    for name in ("RecipeFunction", "ImageFunction", "CanaryFunction"):
        statements = RESOURCES[name]["Properties"]["Policies"][0]["Statement"]
        decrypt = next(s["Fn::If"] for s in statements if "Fn::If" in s)
        condition, statement, absent = decrypt
        assert condition == "HasSecretKmsKey" and absent == {"Ref": "AWS::NoValue"}, name
        assert statement["Action"] == "kms:Decrypt" and statement["Resource"] == {"Ref": "ModelApiKeyKmsKeyArn"}
        assert statement["Condition"]["StringEquals"]["kms:ViaService"] == {
            "Fn::Sub": "secretsmanager.${AWS::Region}.${AWS::URLSuffix}"
        }


def test_no_partition_is_hard_coded() -> None:
    """China regions (aws-cn) and GovCloud deploy the same template."""
    asl = (ROOT / "statemachine" / "recipe.asl.json").read_text()
    resources = re.findall(r'"Resource": "([^"]+)"', asl)
    assert "arn:aws:" not in asl and resources and all(r.startswith("arn:${Partition}:states:::") for r in resources)
    machine = RESOURCES["RecipeStateMachine"]["Properties"]
    assert machine["DefinitionSubstitutions"]["Partition"] == {"Ref": "AWS::Partition"}
    literal = [
        (logical, path)
        for logical, r in RESOURCES.items()
        for path, leaf in walk(r)
        if isinstance(leaf, str) and "arn:aws:" in leaf
    ]
    assert not literal, literal


def test_the_table_and_the_bucket_survive_a_stack_deletion() -> None:
    for name in ("JobsTable", "ImagesBucket"):
        assert RESOURCES[name]["UpdateReplacePolicy"] == "Retain"
        assert "TableName" not in RESOURCES[name]["Properties"] and "BucketName" not in RESOURCES[name]["Properties"]
    # The bucket of a failed first create is deleted; the table keeps deletion protection, which would refuse that.
    assert RESOURCES["ImagesBucket"]["DeletionPolicy"] == "RetainExceptOnCreate"
    assert RESOURCES["JobsTable"]["DeletionPolicy"] == "Retain"
    assert RESOURCES["JobsTable"]["Properties"]["DeletionProtectionEnabled"] is True


# --- operations --------------------------------------------------------------------------------------


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


def test_state_machine_logs_live_under_vendedlogs() -> None:
    group = RESOURCES["StateMachineLogGroup"]["Properties"]["LogGroupName"]
    assert group == {"Fn::Sub": "/aws/vendedlogs/states/${AWS::StackName}-recipe"}


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


def test_the_ladder_before_a_deploy_checks_what_will_be_deployed(tmp_path: Path) -> None:
    """``sam deploy`` keeps the stack's previous values, then applies the command line's overrides, which
    *replace* samconfig.toml's (else samconfig.toml's): a stale 120 s function Timeout kept from an old deploy
    (under today's 140 s total) must break the check even though the defaults are fine."""
    from chuixiang_local.commands.deploy_parameters import MASKED, effective_overrides, samconfig_stack_name

    cfn = boto3.client("cloudformation", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    samconfig = tmp_path / "samconfig.toml"
    samconfig.write_text(
        'version = 0.1\n[default.global.parameters]\nstack_name = "chuixiang-prod"\n'
        '[default.deploy.parameters]\nparameter_overrides = "RecipeIdleTimeoutMs=25000"\n'
    )
    assert samconfig_stack_name(samconfig) == "chuixiang-prod"
    previous = [
        {"ParameterKey": "RecipeFunctionTimeout", "ParameterValue": "120"},
        {"ParameterKey": "RecipeIdleTimeoutMs", "ParameterValue": "30000"},
        {"ParameterKey": "ModelApiKeySecretArn", "ParameterValue": MASKED},
    ]
    stack = {
        "StackName": "chuixiang-prod",
        "CreationTime": "2026-01-01T00:00:00Z",
        "StackStatus": "UPDATE_COMPLETE",
        "Parameters": previous,
    }
    with Stubber(cfn) as stub:
        stub.add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": "chuixiang-prod"})
        effective = effective_overrides(cfn, "chuixiang-prod", samconfig, {"ProgressIntervalMs": "1000"})
    # samconfig.toml's RecipeIdleTimeoutMs=25000 is not sent: the command line replaced its overrides whole.
    assert effective == {"RecipeFunctionTimeout": "120", "RecipeIdleTimeoutMs": "30000", "ProgressIntervalMs": "1000"}
    stale = build_ladder(Template(effective))
    assert not stale.ok and build_ladder(Template({"RecipeIdleTimeoutMs": "25000", "ProgressIntervalMs": "1000"})).ok
    with Stubber(cfn) as stub:  # no command line: samconfig.toml's overrides
        stub.add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": "chuixiang-prod"})
        from_file = effective_overrides(cfn, "chuixiang-prod", samconfig, {})
    assert from_file == {"RecipeFunctionTimeout": "120", "RecipeIdleTimeoutMs": "25000"}
    with Stubber(cfn) as stub:  # a first deploy: no stack yet
        stub.add_client_error("describe_stacks", "ValidationError", "Stack with id chuixiang-prod does not exist")
        assert effective_overrides(cfn, "chuixiang-prod", samconfig, {}) == {"RecipeIdleTimeoutMs": "25000"}


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
    from chuixiang.job_view import render_job
    from chuixiang.polling import poll_after_ms
    from chuixiang.stores.job_item import JobItem

    assert poll_after_ms(item.get("status"), item.get("stage"), item.get("progress")) == after
    stored = {"jobId": "j", "dish": "d", "createdAt": "2026-12-01T00:00:00.000Z", **item}
    if "progress" in item:  # a whole progress record, as the reporter writes it
        stored["progress"] = {"chars": 1, "tokens": 1, "expectedTokens": 1600, "updatedAt": "x", **item["progress"]}
    doc = render_job(JobItem.model_validate(stored), None)
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


# --- releases never break jobs in flight -------------------------------------------------------------


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


# --- the template after SAM's transform --------------------------------------------------------------


def test_the_execution_input_is_what_both_definitions_of_a_rollout_read() -> None:
    """The api rolls out 10 % for 5 minutes: old api code starts the new definition, new code the old one. The
    input is pinned: what the api sends is exactly what the first states read; a new field must be optional
    in the definition (a Choice with IsPresent) before the api sends it, and stay so for one release."""
    from chuixiang.schemas import ExecutionInput

    asl = json.loads((ROOT / "statemachine" / "recipe.asl.json").read_text().replace("${StateMachineTimeout}", "1"))
    first = asl["States"][asl["StartAt"]]
    read = {m.group(1) for m in re.finditer(r'"\$\.(\w+)"', json.dumps(first["Parameters"]))}
    assert set(ExecutionInput.model_fields) == read == {"jobId", "dish"}


def test_first_deploy_states_the_peak_the_ladder_computes() -> None:
    """docs/first-deploy.md's figures are the ladder's on the template's defaults."""
    import re

    from chuixiang_local.template import REPO_ROOT

    said = reservation_problems(Template(), 10)[0]
    peak, admitted = re.search(r"cannot hold (\d+) at the peak: (\d+) admitted jobs", said).groups()  # type: ignore[union-attr]
    doc = " ".join((REPO_ROOT / "docs" / "first-deploy.md").read_text().split())
    assert f"the peak needs {peak} concurrent Lambda executions: {admitted} admitted jobs" in doc
    assert f"`RecipeConcurrency` {int(Template().number('RecipeConcurrency'))} jobs at once" in doc


def test_a_stack_name_the_schedules_cannot_carry_is_refused_before_the_deploy() -> None:
    from chuixiang_local.commands.ladder_cmd import schedule_names, stack_name_problems

    canary = Template({"CanaryModels": "m"})
    assert schedule_names(canary, "s") == ["s-canary", "s-synthetic"]
    assert stack_name_problems(canary, "c" * 54) == []  # 54 + "-synthetic" = 64
    assert "at most 54" in stack_name_problems(canary, "c" * 55)[0]  # the synthetic job's; the canary's fits
    only_canary = Template({"CanaryModels": "m", "SyntheticSchedule": ""})
    assert schedule_names(only_canary, "s") == ["s-canary"] and stack_name_problems(only_canary, "c" * 57) == []
    assert "at most 57" in stack_name_problems(only_canary, "c" * 58)[0]
    assert stack_name_problems(Template(), "c" * 80) == []  # no canary, no schedule
