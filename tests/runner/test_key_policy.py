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
    assert len(problems(locked, [ROLE])) == 1 and "every read of the secret would fail" in problems(locked, [ROLE])[0]
    assert "first deploy" in problems(locked, [])[0]  # before the roles exist: say what to do


def test_a_role_allowed_by_name_may_decrypt() -> None:
    assert problems(policy(allow(ADMIN), allow(ROLE, ["kms:Decrypt", "kms:DescribeKey"])), [ROLE]) == []
    assert problems(policy(allow(ADMIN), allow(ROLE, "kms:Encrypt")), [ROLE]) != []


def test_an_explicit_deny_wins_over_the_delegation() -> None:
    deny = {"Effect": "Deny", "Principal": {"AWS": ROLE}, "Action": "kms:Decrypt", "Resource": "*"}
    assert (
        "an explicit deny in the key policy"
        in problems(policy(allow("arn:aws:iam::123456789012:root"), deny), [ROLE])[0]
    )


def test_the_preflight_reads_the_secret_readers_roles_from_the_stack() -> None:
    import boto3
    from botocore.stub import Stubber

    from chuixiang_local.commands.ladder_cmd import stack_role_arns

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
        roles = stack_role_arns(cfn, "chuixiang", "aws", "123456789012")
    assert roles == [
        "arn:aws:iam::123456789012:role/chuixiang-RecipeFunctionRole-X",
        "arn:aws:iam::123456789012:role/chuixiang-ImageFunctionRole-X",
    ]  # the api reads no secret
    with Stubber(cfn) as stub:  # before the first deploy
        stub.add_client_error("describe_stack_resources", "ValidationError", "Stack with id chuixiang does not exist")
        assert stack_role_arns(cfn, "chuixiang", "aws", "123456789012") == []


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


# --- the cases the preflight and the local cloud disagreed on with KMS, and with each other ---------------------
CN_KEY = "arn:aws-cn:kms:cn-north-1:123456789012:key/1234abcd"
CN_ROLE = "arn:aws-cn:iam::123456789012:role/chuixiang-RecipeFunctionRole-X"


def test_an_account_given_as_its_id_is_the_account_root() -> None:
    """IAM User Guide, *Principal*: an account may be given as its id or its root ARN, and the two are the same
    principal: the default key policy written either way enables IAM policies."""
    assert problems(policy(allow("123456789012")), [ROLE]) == []
    assert problems(policy(allow("123456789012")), []) == []
    assert problems(policy(allow("210987654321")), [ROLE]) != []  # another account's root delegates nothing here


def test_a_condition_on_the_callers_account_or_the_service_is_judged_with_the_decrypts_context() -> None:
    """*AWS KMS condition keys*: Secrets Manager's decrypt carries kms:CallerAccount and kms:ViaService; a key
    policy that allows the account only through Secrets Manager (as AWS's managed secret key does) lets the
    roles in. The preflight judged these with an empty context and refused such keys."""
    via = {
        **allow("*", "kms:Decrypt"),
        "Condition": {
            "StringEquals": {
                "kms:CallerAccount": "123456789012",
                "kms:ViaService": "secretsmanager.us-east-1.amazonaws.com",
            }
        },
    }
    assert problems(policy(via), [ROLE]) == []
    other = {**via, "Condition": {"StringEquals": {"kms:CallerAccount": "210987654321"}}}
    assert problems(policy(other), [ROLE]) != []


def test_in_china_the_service_is_named_in_the_partitions_domain() -> None:
    """The template builds kms:ViaService as secretsmanager.<region>.${AWS::URLSuffix}: amazonaws.com.cn in China."""
    cn_via = {
        **allow("arn:aws-cn:iam::123456789012:root", "kms:Decrypt"),
        "Condition": {"StringEquals": {"kms:ViaService": "secretsmanager.cn-north-1.amazonaws.com.cn"}},
    }
    assert key_policy_problems(policy(cn_via), CN_KEY, "123456789012", "aws-cn", [CN_ROLE]) == []
    global_via = {
        **cn_via,
        "Condition": {"StringEquals": {"kms:ViaService": "secretsmanager.cn-north-1.amazonaws.com"}},
    }
    assert key_policy_problems(policy(global_via), CN_KEY, "123456789012", "aws-cn", [CN_ROLE]) != []


def test_not_principal_applies_to_everyone_it_does_not_list() -> None:
    """IAM User Guide, *NotPrincipal*: the statement applies to every principal except those listed, and with
    ``Deny`` a role's sessions are spared only when the role's session ARN is listed too (and the account, for the
    delegation): listing the role's ARN alone still denies the functions."""
    root = allow("arn:aws:iam::123456789012:root")
    deny_others = {"Effect": "Deny", "NotPrincipal": {"AWS": [ADMIN]}, "Action": "kms:Decrypt", "Resource": "*"}
    assert "explicit deny" in problems(policy(root, deny_others), [ROLE])[0]
    deny_but_role = {**deny_others, "NotPrincipal": {"AWS": [ADMIN, ROLE]}}
    assert problems(policy(root, deny_but_role), [ROLE]) != []
    allow_all_but_admin = {**allow("*", "kms:Decrypt"), "NotPrincipal": {"AWS": [ADMIN]}}
    allow_all_but_admin.pop("Principal")
    assert problems(policy(allow_all_but_admin), [ROLE]) == []  # an Allow to everyone else lets the role in


def test_the_local_cloud_and_the_preflight_give_one_answer() -> None:
    """Both ask decrypt_refusal with kms_context: a key the local cloud lets a role use passes the preflight."""
    from chuixiang_local.cloud.iam.key_policy import kms_context, secret_reader_statement

    cases = [
        policy(allow("123456789012")),
        policy(allow(ADMIN)),
        policy(allow(ROLE, "kms:Decrypt")),
        policy(allow("123456789012"), {"Effect": "Deny", "Principal": "*", "Action": "kms:*", "Resource": "*"}),
    ]
    for doc in cases:
        context = kms_context(region="us-east-1", partition="aws", account="123456789012", role_arn=ROLE, session="s")
        local = decrypt_refusal(
            doc,
            Request("kms:Decrypt", KEY, context),
            role_arn=ROLE,
            account="123456789012",
            partition="aws",
            identity=[secret_reader_statement(KEY, "us-east-1", "aws")],
        )
        assert (local is None) == (problems(doc, [ROLE]) == []), doc
