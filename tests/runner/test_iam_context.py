"""The local IAM judge computes what IAM computes for a Lambda role session, and refuses what IAM refuses.

Each case cites the IAM User Guide sentence it encodes (*AWS global condition context keys*; *IAM JSON policy
elements*). The judge answered ALLOW where IAM answers DENY in each of these before: the principal's ARN was the
session's, the always-present global keys were missing (so a Deny on them never applied), ``"deny"`` allowed, and
a statement without ``Resource`` applied to everything.
"""

from __future__ import annotations

from typing import Any

import pytest
from stack_template import ConfigError, Template

from chuixiang_local.cloud.iam.calls import AwsCall
from chuixiang_local.cloud.iam.facts import authorisation_of
from chuixiang_local.cloud.iam.gate import ACCOUNT, Principal
from chuixiang_local.cloud.iam.policy import Decision, Request, UnsupportedCondition, evaluate, grammar_problems
from chuixiang_local.cloud.iam.roles import roles

TABLE = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/jobs"
PRINCIPAL = Principal(role="chuixiang-RecipeFunctionRole-AbC", session="chuixiang-RecipeFunction-XyZ")


def context_of(principal: Principal = PRINCIPAL) -> dict[str, list[str]]:
    call = AwsCall("AKID", "us-east-1", "dynamodb", "GetItem", {"TableName": "jobs", "Key": {"pk": {"S": "JOB#1"}}})
    [authorisation] = authorisation_of(
        call,
        principal_arn=principal.role_arn,
        account=ACCOUNT,
        partition=principal.partition,
        leading_key=lambda table: "pk",
        session=principal.session,
    )
    return authorisation.context


ALLOW = {"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": TABLE}


def decision(*statements: dict[str, Any]) -> Decision:
    return evaluate(list(statements), Request("dynamodb:GetItem", TABLE, context_of()))[0]


def deny_unless(operator: str, key: str, value: str) -> dict[str, Any]:
    return {"Effect": "Deny", "Action": "*", "Resource": "*", "Condition": {operator: {key: value}}}


# "For IAM roles, the request context returns the ARN of the role, not the ARN of the user that assumed the role."
def test_principal_arn_is_the_roles_arn_not_the_sessions() -> None:
    role_arn = f"arn:aws:iam::{ACCOUNT}:role/chuixiang-RecipeFunctionRole-AbC"
    assert context_of()["aws:principalarn"] == [role_arn]
    on_role = {**ALLOW, "Condition": {"ArnEquals": {"aws:PrincipalArn": role_arn}}}
    assert decision(on_role) is Decision.ALLOW
    on_session = {**ALLOW, "Condition": {"ArnEquals": {"aws:PrincipalArn": PRINCIPAL.arn}}}
    assert decision(on_session) is Decision.IMPLICIT_DENY  # "Do not specify the assumed role session ARN"


@pytest.mark.parametrize(
    ("key", "value", "source"),
    [
        ("aws:PrincipalAccount", ACCOUNT, "aws:PrincipalAccount: 'This key is always included in the request context'"),
        ("aws:PrincipalType", "AssumedRole", "aws:PrincipalType: 'always included'; AssumedRole for a role session"),
        ("aws:PrincipalIsAWSService", "false", "aws:PrincipalIsAWSService: 'always included', false for a role"),
        ("aws:ViaAWSService", "false", "aws:ViaAWSService: 'always included', false when the principal calls"),
        ("aws:RequestedRegion", "us-east-1", "aws:RequestedRegion: 'always included'"),
        ("aws:SecureTransport", "true", "aws:SecureTransport: 'always included'; SDK calls are HTTPS"),
    ],
)
def test_a_deny_on_a_key_iam_always_sets_applies(key: str, value: str, source: str) -> None:
    boolean = value in ("true", "false")
    equals, other = ("Bool", "false" if value == "true" else "true") if boolean else ("StringEquals", "other")
    assert decision(ALLOW, deny_unless(equals, key, value)) is Decision.EXPLICIT_DENY, source
    assert decision(ALLOW, deny_unless(equals, key, other)) is Decision.ALLOW, source


# aws:userid for a role session: "role-id:caller-specified-role-name" (the role's unique id stands as its name).
def test_userid_is_the_role_and_the_session() -> None:
    assert context_of()["aws:userid"] == ["chuixiang-RecipeFunctionRole-AbC:chuixiang-RecipeFunction-XyZ"]


# aws:SourceArn: "present in the request context only when a call to your resource is being made directly by an
# AWS service principal"; aws:username: not for roles; aws:CalledVia: only when a service calls on the principal's
# behalf. A function's own call carries none of them: a condition on them finds them absent.
@pytest.mark.parametrize("key", ["aws:SourceArn", "aws:SourceAccount", "aws:username", "aws:CalledVia"])
def test_keys_absent_from_a_functions_own_call_are_absent(key: str) -> None:
    assert decision({**ALLOW, "Condition": {"StringEquals": {key: "x"}}}) is Decision.IMPLICIT_DENY
    assert decision({**ALLOW, "Condition": {"Null": {key: "true"}}}) is Decision.ALLOW


# A global key IAM may set that is not computed here (tags, source IP): refused loudly, never read as absent.
@pytest.mark.parametrize("key", ["aws:PrincipalTag/team", "aws:SourceIp", "aws:ResourceTag/owner", "aws:CurrentTime"])
def test_a_condition_on_an_uncomputed_global_key_is_refused_not_guessed(key: str) -> None:
    with pytest.raises(UnsupportedCondition):
        decision(ALLOW, deny_unless("StringEquals", key, "x"))


# "Valid values for Effect are Allow and Deny. The Effect value is case sensitive."
# "Each statement must include either an Action or NotAction element."
# Identity-based policies: "you must include either a Resource or a NotResource element".
@pytest.mark.parametrize(
    ("statement", "problem"),
    [
        ({"Effect": "deny", "Action": "*", "Resource": "*"}, "neither Allow nor Deny"),
        ({"Effect": "Allow", "Resource": "*"}, "neither Action nor NotAction"),
        ({"Effect": "Allow", "Action": "s3:GetObject"}, "neither Resource nor NotResource"),
        ({"Effect": "Allow", "Action": "*", "NotAction": "s3:*", "Resource": "*"}, "both Action and NotAction"),
        ({"Effect": "Allow", "Action": "*", "Resource": "*", "Principal": "*"}, "a Principal in an identity"),
        ({**ALLOW, "Condition": {"StringEqualz": {"aws:PrincipalType": "AssumedRole"}}}, "unknown condition operator"),
    ],
)
def test_a_statement_iam_refuses_is_malformed(statement: dict[str, Any], problem: str) -> None:
    assert any(problem in p for p in grammar_problems(statement)), grammar_problems(statement)
    if "Principal" not in statement and "Condition" not in statement:  # and it is judged as no statement at all
        assert decision(statement) is Decision.IMPLICIT_DENY


def test_the_local_cloud_refuses_a_template_iam_would_refuse() -> None:
    """As CloudFormation fails the role's create with MalformedPolicyDocument."""
    template = Template()
    transformed = {
        "Fn": {"Type": "AWS::Lambda::Function", "Properties": {"Role": {"Fn::GetAtt": ["FnRole", "Arn"]}}},
        "FnRole": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "Policies": [
                    {
                        "PolicyName": "p",
                        "PolicyDocument": {"Statement": [{"Effect": "deny", "Action": "*", "Resource": "*"}]},
                    }
                ]
            },
        },
    }
    with pytest.raises(ConfigError, match="MalformedPolicyDocument"):
        roles(transformed, template)
