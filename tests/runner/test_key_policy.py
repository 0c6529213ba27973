"""The model secret's customer-managed key, judged as KMS judges it: the key policy must enable IAM policies
(allow the account) or allow each role itself; an explicit deny wins (AWS KMS developer guide, *Key policies*)."""

from __future__ import annotations

from typing import Any

from chuixiang_local.cloud.iam.key_policy import decrypt_refusal
from chuixiang_local.cloud.iam.policy import Request
from chuixiang_local.commands.key_policy import key_policy_problems

KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd"
ROLE = "arn:aws:iam::123456789012:role/chuixiang-RecipeFunctionRole-X"
ADMIN = "arn:aws:iam::123456789012:user/admin"


def policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def allow(principal: str, action: str | list[str] = "kms:*") -> dict[str, Any]:
    return {"Effect": "Allow", "Principal": {"AWS": principal}, "Action": action, "Resource": "*"}


def problems(doc: dict[str, Any], roles: list[str]) -> list[str]:
    return key_policy_problems(doc, KEY, "123456789012", "aws", roles)


def test_the_default_key_policy_enables_iam_policies() -> None:
    assert problems(policy(allow("arn:aws:iam::123456789012:root")), [ROLE]) == []
    assert problems(policy(allow("arn:aws:iam::123456789012:root")), []) == []


def test_a_policy_for_an_administrator_only_locks_the_functions_out() -> None:
    locked = policy(allow(ADMIN))
    assert len(problems(locked, [ROLE])) == 1 and "every job would fail" in problems(locked, [ROLE])[0]
    assert "first deploy" in problems(locked, [])[0]  # before the roles exist: say what to do


def test_a_role_allowed_by_name_may_decrypt() -> None:
    assert problems(policy(allow(ADMIN), allow(ROLE, ["kms:Decrypt", "kms:DescribeKey"])), [ROLE]) == []
    assert problems(policy(allow(ADMIN), allow(ROLE, "kms:Encrypt")), [ROLE]) != []


def test_an_explicit_deny_wins_over_the_delegation() -> None:
    deny = {"Effect": "Deny", "Principal": {"AWS": ROLE}, "Action": "kms:Decrypt", "Resource": "*"}
    assert "denies" in problems(policy(allow("arn:aws:iam::123456789012:root"), deny), [ROLE])[0]


def test_the_preflight_reads_the_secret_readers_roles_from_the_stack() -> None:
    import boto3
    from botocore.stub import Stubber

    from chuixiang_local.commands.ladder_cmd import _stack_role_arns

    cfn = boto3.client("cloudformation", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    resources = [
        {
            "LogicalResourceId": lid,
            "PhysicalResourceId": f"chuixiang-{lid}-X",
            "ResourceType": "AWS::IAM::Role",
            "ResourceStatus": "CREATE_COMPLETE",
            "Timestamp": "2026-01-01T00:00:00Z",
        }
        for lid in ("ApiFunctionRole", "RecipeFunctionRole", "ImageFunctionRole")
    ]
    with Stubber(cfn) as stub:
        stub.add_response("describe_stack_resources", {"StackResources": resources}, {"StackName": "chuixiang"})
        roles = _stack_role_arns(cfn, "chuixiang", "aws", "123456789012")
    assert roles == [
        "arn:aws:iam::123456789012:role/chuixiang-RecipeFunctionRole-X",
        "arn:aws:iam::123456789012:role/chuixiang-ImageFunctionRole-X",
    ]  # the api reads no secret
    with Stubber(cfn) as stub:  # before the first deploy
        stub.add_client_error("describe_stack_resources", "ValidationError", "Stack with id chuixiang does not exist")
        assert _stack_role_arns(cfn, "chuixiang", "aws", "123456789012") == []


VIA = {"kms:viaservice": ["secretsmanager.us-east-1.amazonaws.com"]}
IDENTITY_ALLOWS: list[dict[str, Any]] = [
    {
        "Effect": "Allow",
        "Action": "kms:Decrypt",
        "Resource": KEY,
        "Condition": {"StringEquals": {"kms:ViaService": "secretsmanager.us-east-1.amazonaws.com"}},
    }
]


def refusal(doc: dict[str, Any], identity: list[dict[str, Any]], context: dict[str, list[str]] = VIA) -> str | None:
    return decrypt_refusal(
        doc,
        Request("kms:Decrypt", KEY, context),
        role_arn=ROLE,
        account="123456789012",
        partition="aws",
        identity=identity,
    )


def test_kms_needs_the_key_policy_and_the_role_policy_together() -> None:
    root = policy(allow("arn:aws:iam::123456789012:root"))
    assert refusal(root, IDENTITY_ALLOWS) is None  # IAM enabled, and the role's statement allows it
    assert refusal(root, []) == "no identity-based policy allows the kms:Decrypt action"
    assert refusal(root, IDENTITY_ALLOWS, {}) is not None  # not through Secrets Manager: the condition fails
    assert refusal(policy(allow(ROLE, "kms:Decrypt")), []) is None  # the key policy alone may allow the role
    assert "neither allows the role" in (refusal(policy(allow(ADMIN)), IDENTITY_ALLOWS) or "")


def test_an_explicit_deny_in_either_policy_wins() -> None:
    deny = {"Effect": "Deny", "Principal": {"AWS": ROLE}, "Action": "kms:Decrypt", "Resource": "*"}
    assert refusal(policy(allow(ROLE, "kms:Decrypt"), deny), IDENTITY_ALLOWS) == "an explicit deny in the key policy"
    own_deny: list[dict[str, Any]] = [*IDENTITY_ALLOWS, {"Effect": "Deny", "Action": "kms:*", "Resource": "*"}]
    assert refusal(policy(allow(ROLE, "kms:Decrypt")), own_deny) == "an explicit deny in an identity-based policy"
