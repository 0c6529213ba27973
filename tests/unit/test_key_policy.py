"""The model secret's customer-managed key, judged as KMS judges it: the key policy must enable IAM policies
(allow the account) or allow each role itself; an explicit deny wins (AWS KMS developer guide, *Key policies*)."""

from __future__ import annotations

from chuixiang_local.commands.key_policy import key_policy_problems

KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd"
ROLE = "arn:aws:iam::123456789012:role/chuixiang-RecipeFunctionRole-X"
ADMIN = "arn:aws:iam::123456789012:user/admin"


def policy(*statements: dict) -> dict:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def allow(principal: str, action: str | list[str] = "kms:*") -> dict:
    return {"Effect": "Allow", "Principal": {"AWS": principal}, "Action": action, "Resource": "*"}


def problems(doc: dict, roles: list[str]) -> list[str]:
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

    from chuixiang_local.commands.cli import _stack_role_arns

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
