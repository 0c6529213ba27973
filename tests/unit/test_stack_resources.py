"""The stack's resources as a real account takes them: each name per stack, no partition written in, the data
kept when the stack goes, the state machine's logs where Step Functions can write them, the model key's secret
read as Secrets Manager and KMS allow."""

from __future__ import annotations

import json
import re

import pytest
from stack_template import REPO_ROOT

from ..support.template_doc import DOC, RESOURCES, walk


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
    asl = (REPO_ROOT / "statemachine" / "recipe.asl.json").read_text()
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


def test_state_machine_logs_live_under_vendedlogs() -> None:
    group = RESOURCES["StateMachineLogGroup"]["Properties"]["LogGroupName"]
    assert group == {"Fn::Sub": "/aws/vendedlogs/states/${AWS::StackName}-recipe"}
