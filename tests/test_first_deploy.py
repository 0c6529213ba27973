"""What would break the first deploy to a real account, or production after it: each item of that review
checked here as far as it can be without AWS (the template, the ASL, the Makefile, the CLI)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.stub import Stubber

from chuixiang_local.api_client import LocalApi
from chuixiang_local.ladder import account_concurrency, build_ladder, reservation_problems
from chuixiang_local.template import Template

from .serve_helper import ROOT, Serve, free_port
from .waiting import wait_until

DOC = Template().doc
RESOURCES: dict[str, Any] = DOC["Resources"]


def walk(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every (path, leaf) of a template fragment."""
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in walk(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [pair for i, v in enumerate(value) for pair in walk(v, f"{path}[{i}]")]
    return [(path, value)]


# --- would break the deploy ------------------------------------------------------------------------


def test_reserved_concurrency_is_optional() -> None:
    assert DOC["Parameters"]["RecipeReservedConcurrency"]["Default"] == 0
    assert DOC["Conditions"]["HasReservedConcurrency"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "RecipeReservedConcurrency"}, 0]}]}
    for name in ("RecipeFunction", "ImageFunction"):
        assert RESOURCES[name]["Properties"]["ReservedConcurrentExecutions"] == {
            "Fn::If": ["HasReservedConcurrency", {"Ref": "RecipeReservedConcurrency"}, {"Ref": "AWS::NoValue"}]}
    # The API still admits no more jobs than RecipeConcurrency, reserved or not.
    assert RESOURCES["ApiFunction"]["Properties"]["Environment"]["Variables"]["MAX_JOBS_IN_FLIGHT"] == {
        "Ref": "RecipeConcurrency"}


def test_reserved_concurrency_is_checked_against_admission_and_the_account_quota() -> None:
    assert reservation_problems(Template()) == []  # none reserved: nothing to check
    assert build_ladder(Template({"RecipeReservedConcurrency": "20"})).ok
    below = build_ladder(Template({"RecipeReservedConcurrency": "5"}))
    assert not below.ok and any("below RecipeConcurrency" in f for f in below.failures())
    new_account = reservation_problems(Template({"RecipeReservedConcurrency": "20"}), account_limit=50)
    assert len(new_account) == 1 and "leaves 10 of the account's concurrency quota 50" in new_account[0]
    twenty = Template({"RecipeReservedConcurrency": "20"})
    assert reservation_problems(twenty, 1000, already_reserved=870) != []  # 90 left unreserved
    assert reservation_problems(twenty, 1000, already_reserved=860) == []  # 100 left


def test_the_account_quota_is_read_as_lambda_reports_it() -> None:
    client = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_response("get_account_settings", {"AccountLimit": {
            "TotalCodeSize": 80530636800, "CodeSizeUnzipped": 262144000, "CodeSizeZipped": 52428800,
            "ConcurrentExecutions": 10, "UnreservedConcurrentExecutions": 10}, "AccountUsage": {
            "TotalCodeSize": 0, "FunctionCount": 0}})
        assert account_concurrency(client) == (10, 0)


def test_ladder_account_check_says_when_it_cannot_read_the_quota() -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens: the call fails at once, on loopback
    env = {**os.environ, "AWS_ENDPOINT_URL": closed, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_MAX_ATTEMPTS": "1"}
    done = subprocess.run([sys.executable, "-m", "chuixiang_local.cli", "ladder", "--account", "--parameter-overrides",
                           "RecipeReservedConcurrency=20"], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "could not be read" in done.stderr


def test_every_named_resource_is_named_per_stack() -> None:
    """Two stacks in one account and region must not collide: a fixed name is a second deploy's failure."""
    name_keys = re.compile(r"\.(Name|LogGroupName|TopicName|TableName|BucketName|QueueName|FunctionName|RuleName|"
                           r"StateMachineName|ScheduleName|AlarmName|DashboardName|KeyAlias|AliasName)$")
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
    alarms = [r for r in RESOURCES.values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert alarms and all(r["Properties"]["AlarmActions"] == [{"Ref": "AlarmTopic"}] for r in alarms)


@pytest.mark.parametrize(("arn", "ok"), [
    ("arn:aws:secretsmanager:us-east-1:123456789012:secret:chuixiang/model-api-key-AbC123", True),
    ("arn:aws-cn:secretsmanager:cn-north-1:123456789012:secret:chuixiang/model-api-key-xYz789", True),
    ("arn:aws:secretsmanager:us-east-1:123456789012:secret:chuixiang/model-api-key", False),  # no suffix
    ("arn:aws:secretsmanager:us-east-1:123456789012:secret:chuixiang/model-api-key-*", False),
    ("chuixiang/model-api-key", False),
])
def test_the_secret_arn_must_carry_its_random_suffix(arn: str, ok: bool) -> None:
    pattern = DOC["Parameters"]["ModelApiKeySecretArn"]["AllowedPattern"]
    assert bool(re.fullmatch(pattern, arn)) is ok


def test_a_secret_under_a_customer_key_can_be_decrypted() -> None:
    pattern = DOC["Parameters"]["ModelApiKeyKmsKeyArn"]["AllowedPattern"]
    assert re.fullmatch(pattern, "") and re.fullmatch(pattern, "arn:aws:kms:us-east-1:123456789012:key/"
                                                                "1234abcd-12ab-34cd-56ef-1234567890ab")
    for name in ("RecipeFunction", "ImageFunction", "CanaryFunction"):
        statements = RESOURCES[name]["Properties"]["Policies"][0]["Statement"]
        decrypt = next(s["Fn::If"] for s in statements if "Fn::If" in s)
        condition, statement, absent = decrypt
        assert condition == "HasSecretKmsKey" and absent == {"Ref": "AWS::NoValue"}, name
        assert statement["Action"] == "kms:Decrypt" and statement["Resource"] == {"Ref": "ModelApiKeyKmsKeyArn"}
        assert statement["Condition"]["StringEquals"]["kms:ViaService"] == {
            "Fn::Sub": "secretsmanager.${AWS::Region}.${AWS::URLSuffix}"}


def test_no_partition_is_hard_coded() -> None:
    """China regions (aws-cn) and GovCloud deploy the same template."""
    asl = (ROOT / "statemachine" / "recipe.asl.json").read_text()
    resources = re.findall(r'"Resource": "([^"]+)"', asl)
    assert "arn:aws:" not in asl and resources and all(r.startswith("arn:${Partition}:states:::") for r in resources)
    machine = RESOURCES["RecipeStateMachine"]["Properties"]
    assert machine["DefinitionSubstitutions"]["Partition"] == {"Ref": "AWS::Partition"}
    literal = [(logical, path) for logical, r in RESOURCES.items() for path, leaf in walk(r)
               if isinstance(leaf, str) and "arn:aws:" in leaf]
    assert not literal, literal


def test_the_table_and_the_bucket_survive_a_stack_deletion() -> None:
    for name in ("JobsTable", "ImagesBucket"):
        assert RESOURCES[name]["DeletionPolicy"] == "Retain" and RESOURCES[name]["UpdateReplacePolicy"] == "Retain"
    assert RESOURCES["JobsTable"]["Properties"]["DeletionProtectionEnabled"] is True


@pytest.mark.pipeline
@pytest.mark.parametrize("body", ['{"dish": ' + "9" * 5000 + "}", '{"dish": "番茄炒蛋", "n": -' + "1" * 4400 + "}"])
def test_an_integer_of_more_than_4300_digits_is_a_400(body: str, api: LocalApi) -> None:
    status, doc = api.request("POST", "/recipes", body)
    assert status == 400 and doc["error"]["code"] == "INVALID_DISH" and "4300" in doc["error"]["reason"], doc


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
    alarm = RESOURCES["ReconcileDeliveryFailedAlarm"]["Properties"]
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": ["ReconcileDeadLetterQueue",
                                                                                  "QueueName"]}}]


def test_state_machine_logs_live_under_vendedlogs() -> None:
    group = RESOURCES["StateMachineLogGroup"]["Properties"]["LogGroupName"]
    assert group == {"Fn::Sub": "/aws/vendedlogs/states/${AWS::StackName}-recipe"}



@pytest.mark.pipeline
def test_a_browser_preflight_gets_the_configured_origins_and_never_needs_a_token() -> None:
    """Through ``chuixiang serve`` with CorsAllowOrigins set and the JWT authorizer on: OPTIONS on both routes
    answers 204 with the CORS headers for an allowed origin and none for another; HEAD on a job answers as
    GET without a body; the refusals the gate makes carry the CORS headers too."""
    origins = "https://servicewechat.com,https://admin.example.cn"
    overrides = {"CorsAllowOrigins": origins, "JwtIssuer": "https://login.example.cn", "JwtAudience": "mini"}
    with Serve(overrides) as serve:
        for path in ("/recipes", "/recipes/0badc0de-0000-4000-8000-000000000009"):
            ok = httpx.options(f"{serve.base}{path}", timeout=30, headers={
                "Origin": "https://servicewechat.com", "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,authorization"})
            assert ok.status_code == 204, (path, ok.status_code, ok.text)
            assert ok.headers["access-control-allow-origin"] == "https://servicewechat.com"
            assert "POST" in ok.headers["access-control-allow-methods"]
            assert "authorization" in ok.headers["access-control-allow-headers"].lower()
            other = httpx.options(f"{serve.base}{path}", timeout=30, headers={"Origin": "https://evil.example"})
            assert other.status_code == 204 and "access-control-allow-origin" not in other.headers
        # Everything else still needs the token.
        assert httpx.post(f"{serve.base}/recipes", json={"dish": "x"}, timeout=30).status_code == 401


@pytest.mark.pipeline
def test_head_on_a_job_answers_like_get_without_a_body() -> None:
    with Serve({"CorsAllowOrigins": "https://servicewechat.com"}) as serve:
        job_id = serve.post("头部菜")
        got = httpx.get(f"{serve.base}/recipes/{job_id}", timeout=30)
        head = httpx.head(f"{serve.base}/recipes/{job_id}", timeout=30)
        assert head.status_code == got.status_code == 200 and head.content == b""
        assert head.headers["content-type"] == got.headers["content-type"]
        missing = httpx.head(f"{serve.base}/recipes/0badc0de-0000-4000-8000-00000000000a", timeout=30)
        assert missing.status_code == 404 and missing.content == b""
        refused = httpx.put(f"{serve.base}/recipes", timeout=30, headers={"Origin": "https://servicewechat.com"})
        assert refused.status_code == 405
        assert refused.headers["access-control-allow-origin"] == "https://servicewechat.com"


@pytest.mark.pipeline
def test_a_slot_frees_when_its_job_ends_whoever_polls() -> None:
    """Twenty jobs nobody polls (closed mini-programs) hold every slot while they run; the workflow frees
    each slot as its job ends, so the next POST gets 202 then, not after the slots' leases (the deadline)."""
    with Serve({"RecipeConcurrency": "20"}, fake_pace_ms=8) as serve:
        jobs = [serve.post(f"没人等的菜{i}") for i in range(20)]
        full = httpx.post(f"{serve.base}/recipes", json={"dish": "第二十一道菜"}, timeout=30)
        assert full.status_code == 429 and int(full.headers["retry-after"]) >= 1, full.text
        endpoint = re.search(r"the local cloud \(moto\) at (http://[\d.:]+)", serve.output())
        assert endpoint, serve.output()[-2000:]
        sfn = boto3.client("stepfunctions", endpoint_url=endpoint[1], region_name="us-east-1",
                           aws_access_key_id="testing", aws_secret_access_key="testing")  # nosec B106 - moto
        machine = sfn.list_state_machines()["stateMachines"][0]["stateMachineArn"]

        def ended() -> bool:
            done = sfn.list_executions(stateMachineArn=machine, statusFilter="SUCCEEDED")["executions"]
            return {e["name"] for e in done} >= set(jobs)

        wait_until(ended, timeout_s=120, what="the twenty jobs ended", interval_s=0.5)
        again = httpx.post(f"{serve.base}/recipes", json={"dish": "第二十一道菜"}, timeout=30)
        assert again.status_code == 202, again.text


@pytest.mark.pipeline
def test_an_idempotency_key_is_scoped_to_its_caller(api: LocalApi) -> None:
    """With the JWT authorizer on, the same Idempotency-Key from another user (another ``sub``) is another
    request: it must never hand back the first caller's job."""
    from chuixiang_local.api_client import http_event

    def post(sub: str, dish: str) -> tuple[int, dict[str, Any]]:
        event = http_event("POST", "/recipes", json.dumps({"dish": dish}, ensure_ascii=False),
                           {"Idempotency-Key": "the-same-key-0001"})
        event["requestContext"]["authorizer"] = {"jwt": {"claims": {"sub": sub, "iss": "x"}, "scopes": None}}
        answer = api.invoke(event)
        return answer["statusCode"], json.loads(answer["body"])

    alice, alice_again = post("alice", "鱼香茄子"), post("alice", "鱼香茄子")
    assert alice[0] == alice_again[0] == 202 and alice[1]["jobId"] == alice_again[1]["jobId"]  # a retry: one job
    assert post("alice", "水煮牛肉")[0] == 422  # her key, another dish: refused, as before
    # Bob's same key with another dish is his own first request (with global keys it was alice's: 422).
    bob = post("bob", "水煮牛肉")
    assert bob[0] == 202 and bob[1]["jobId"] != alice[1]["jobId"], bob


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
    watched = {m["MetricStat"]["Metric"]["MetricName"] for m in alarms["ExecutionsAbortedOrThrottledAlarm"]["Metrics"]
               if "MetricStat" in m}
    assert watched == {"ExecutionsAborted", "ExecutionThrottled"}
    rate = alarms["JobFailureRateAlarm"]
    counted = {m["MetricStat"]["Metric"]["MetricName"] for m in rate["Metrics"] if "MetricStat" in m}
    assert counted == {"ExecutionsStarted", "ExecutionsFailed", "ExecutionsTimedOut", "ExecutionsAborted"}
    assert rate["Threshold"] == {"Ref": "JobFailureRateThreshold"}
    assert all(a["AlarmActions"] == [{"Ref": "AlarmTopic"}] for a in alarms.values())


def test_the_ladder_before_a_deploy_checks_what_will_be_deployed(tmp_path: Path) -> None:
    """``sam deploy`` keeps the stack's previous values, then samconfig.toml's, then the command line's:
    a stale 120 s function Timeout kept from an old deploy (under today's 140 s total) must break the check
    even though the defaults are fine."""
    from chuixiang_local.deploy_parameters import MASKED, effective_overrides, samconfig_stack_name

    cfn = boto3.client("cloudformation", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    samconfig = tmp_path / "samconfig.toml"
    samconfig.write_text('version = 0.1\n[default.global.parameters]\nstack_name = "chuixiang-prod"\n'
                         '[default.deploy.parameters]\nparameter_overrides = "RecipeIdleTimeoutMs=25000"\n')
    assert samconfig_stack_name(samconfig) == "chuixiang-prod"
    previous = [{"ParameterKey": "RecipeFunctionTimeout", "ParameterValue": "120"},
                {"ParameterKey": "RecipeIdleTimeoutMs", "ParameterValue": "30000"},
                {"ParameterKey": "ModelApiKeySecretArn", "ParameterValue": MASKED}]
    stack = {"StackName": "chuixiang-prod", "CreationTime": "2026-01-01T00:00:00Z",
             "StackStatus": "UPDATE_COMPLETE", "Parameters": previous}
    with Stubber(cfn) as stub:
        stub.add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": "chuixiang-prod"})
        effective = effective_overrides(cfn, "chuixiang-prod", samconfig, {"ProgressIntervalMs": "1000"})
    assert effective == {"RecipeFunctionTimeout": "120", "RecipeIdleTimeoutMs": "25000", "ProgressIntervalMs": "1000"}
    stale = build_ladder(Template(effective))
    assert not stale.ok and build_ladder(Template({"RecipeIdleTimeoutMs": "25000", "ProgressIntervalMs": "1000"})).ok
    with Stubber(cfn) as stub:  # a first deploy: no stack yet
        stub.add_client_error("describe_stacks", "ValidationError", "Stack with id chuixiang-prod does not exist")
        assert effective_overrides(cfn, "chuixiang-prod", samconfig, {}) == {"RecipeIdleTimeoutMs": "25000"}


@pytest.mark.parametrize(("item", "after"), [
    ({"status": "PENDING"}, 5000),
    ({"status": "RUNNING", "stage": "recipe"}, 5000),  # queued or thinking: nothing to show yet
    ({"status": "RUNNING", "stage": "recipe", "progress": {"percent": 40, "etaMs": 50_000}}, 3000),
    ({"status": "RUNNING", "stage": "recipe", "progress": {"percent": 60, "etaMs": 4000}}, 1500),
    ({"status": "RUNNING", "stage": "recipe", "progress": {"percent": 92, "etaMs": None}}, 1500),
    ({"status": "RUNNING", "stage": "image"}, 5000),  # the recipe is on screen
    ({"status": "RUNNING", "stage": "done"}, 1000),
    ({"status": "SUCCEEDED", "stage": "done"}, None), ({"status": "FAILED", "stage": "recipe"}, None),
])
def test_poll_after_follows_the_job(item: dict[str, Any], after: int | None) -> None:
    from chuixiang.polling import poll_after_ms
    from chuixiang.stores.jobs import render

    assert poll_after_ms(item) == after
    stored = {"jobId": "j", "dish": "d", "createdAt": "2026-12-01T00:00:00.000Z", **item}
    if "progress" in item:  # a whole progress record, as the reporter writes it
        stored["progress"] = {"chars": 1, "tokens": 1, "expectedTokens": 1600, "updatedAt": "x", **item["progress"]}
    doc = render(stored, None)
    assert doc.pollAfterMs == after


def test_the_poll_route_is_throttled_apart_from_the_rest() -> None:
    http = RESOURCES["RecipeApi"]["Properties"]
    assert http["RouteSettings"] == {"ANY /recipes/{jobId}": {"ThrottlingBurstLimit": {"Ref": "ApiPollBurstLimit"},
                                                              "ThrottlingRateLimit": {"Ref": "ApiPollRateLimit"}}}
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
    assert {"Effect": "Allow", "Action": "states:StartExecution",
            "Resource": {"Fn::Sub": "${RecipeStateMachine}:live"}} in api["Policies"][-1]["Statement"]
    assert api["DeploymentPreference"] == {"Type": "Canary10Percent5Minutes",
                                           "Alarms": [{"Ref": "ApiErrorsAlarm"}, {"Ref": "Api5xxAlarm"}]}
    assert api["SnapStart"] == {"ApplyOn": "PublishedVersions"}


@pytest.mark.pipeline
def test_a_job_started_before_a_release_finishes_on_the_old_code(module_fake: Any, tmp_path: Path,
                                                                  scaled_template: Template) -> None:
    """A deploy in the middle of a job: the job keeps the versions it started with (its recipe is held at
    the model while the image function is released with new code); a job started after runs the new code."""
    from chuixiang_local.engine import LocalCloud
    from chuixiang_local.fake_model import ChatBehaviour

    from .conftest import SCALED

    new_image = tmp_path / "image-v2"
    shutil.copytree(ROOT / "functions" / "image", new_image)
    (new_image / "app.py").write_text(  # the new release's image function: it fails every picture
        "def lambda_handler(event, context):\n    raise RuntimeError('image function v2')\n")
    with open(tmp_path / "log", "w") as log, LocalCloud(SCALED, model_base_url=module_fake.base_url,
                                                        work_dir=tmp_path, log=log) as cloud:
        api = LocalApi(cloud)
        # The first job's recipe is held at the model (half its first-content limit) while the release happens.
        hold_s = scaled_template.number("RecipeFirstContentTimeoutMs") / 1000 / 2
        module_fake.chat_script.append(ChatBehaviour(headers_delay_s=hold_s))
        before = api.post_dish("发布前的菜")[1]["jobId"]
        wait_until(lambda: module_fake.count("/chat/completions"), timeout_s=15, what="the first job's recipe call")
        assert cloud.release({"ImageFunction": new_image}) == "2"
        after = api.wait(api.post_dish("发布后的菜")[1]["jobId"], give_up_s=30)
        first = api.wait(before, give_up_s=30)
    assert first["status"] == "SUCCEEDED" and first["image"] is not None and first["imageError"] is None, first
    assert after["status"] == "SUCCEEDED" and after["image"] is None and after["imageError"] is not None, after


# --- the template after SAM's transform --------------------------------------------------------------

SAM_PYTHON = ROOT / ".venv-sam" / "bin" / "python"


def transform(region: str) -> dict[str, Any]:
    done = subprocess.run([str(SAM_PYTHON), str(ROOT / "tests" / "sam_transform.py"), "{}", region],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout)["Resources"])


@pytest.fixture(scope="module")
def transformed() -> dict[str, Any]:
    """``template.yaml`` as CloudFormation will see it in a China region, the WeChat product's real target
    (``make test`` installs aws-sam-cli's venv first)."""
    return transform("cn-north-1")


def test_after_the_transform_no_partition_no_fixed_name_and_the_key_alarms_can_use(
        transformed: dict[str, Any]) -> None:
    literal = [(lid, path) for lid, r in transformed.items() for path, leaf in walk(r)
               if isinstance(leaf, str) and "arn:aws:" in leaf]
    assert not literal, literal
    schedules = [r for r in transformed.values() if r["Type"] == "AWS::Scheduler::Schedule"]
    assert [s["Properties"]["Name"] for s in schedules] == [{"Fn::Sub": "${AWS::StackName}-canary"}]
    topic = next(r for r in transformed.values() if r["Type"] == "AWS::SNS::Topic")
    assert topic["Properties"]["KmsMasterKeyId"] == {"Ref": "AlarmTopicKey"}
    for lid in ("JobsTable", "ImagesBucket"):
        assert transformed[lid]["DeletionPolicy"] == transformed[lid]["UpdateReplacePolicy"] == "Retain"


def test_after_the_transform_executions_call_versions_and_start_on_the_alias(transformed: dict[str, Any]) -> None:
    versions = {lid for lid, r in transformed.items() if r["Type"] == "AWS::Lambda::Version"}
    machine = next(r for r in transformed.values() if r["Type"] == "AWS::StepFunctions::StateMachine")
    called = {machine["Properties"]["DefinitionSubstitutions"][f"{n}FunctionArn"]["Ref"] for n in
              ("Submit", "Recipe", "Image")}
    assert called <= versions  # immutable versions, not $LATEST or an alias that moves during a job
    alias = transformed["RecipeStateMachineAliaslive"]
    assert alias["Type"] == "AWS::StepFunctions::StateMachineAlias"
    assert any(r["Type"] == "AWS::StepFunctions::StateMachineVersion" for r in transformed.values())
    api = transformed["ApiFunction"]["Properties"]
    assert api["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    assert transformed["ApiFunctionAliaslive"]["UpdatePolicy"]["CodeDeployLambdaAliasUpdate"]  # gradual rollout
