"""The local IAM judge against IAM, case by case: each case quotes or names the AWS documentation sentence it
encodes (IAM User Guide: "Policy evaluation logic", "IAM JSON policy elements: Condition operators",
"Multivalued context keys"; the DynamoDB, Lambda and Step Functions guides for what each service authorises).
``docs/local-runner.md#strict-where-aws-is-strict`` states the count."""

from __future__ import annotations

from typing import Any

import pytest

from chuixiang_local.cloud.iam.calls import AwsCall
from chuixiang_local.cloud.iam.policy import Decision, Request, evaluate

from ..support.iam_calls import ACCOUNT, authorisations

REGION = "us-east-1"
TABLE = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/jobs"
FN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:recipe"
SM = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:recipes"
ALLOW, DENY, NONE = Decision.ALLOW, Decision.EXPLICIT_DENY, Decision.IMPLICIT_DENY


def allow(action: Any, resource: Any = "*", condition: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "Effect": "Allow",
        "Action": action,
        "Resource": resource,
        **({"Condition": condition} if condition else {}),
        **extra,
    }


def deny(action: Any, resource: Any = "*", condition: dict[str, Any] | None = None) -> dict[str, Any]:
    return {**allow(action, resource, condition), "Effect": "Deny"}


def req(action: str, resource: str = TABLE, **context: list[str]) -> Request:
    return Request(action, resource, {k.lower().replace("__", ":"): v for k, v in context.items()})


#: (case, the documentation it encodes, statements, request, decision)
CASES: list[tuple[str, str, list[dict[str, Any]], Request, Decision]] = [
    # --- evaluation logic
    (
        "nothing allows",
        "Evaluation logic: by default, all requests are implicitly denied",
        [],
        req("dynamodb:GetItem"),
        NONE,
    ),
    (
        "an allow allows",
        "Evaluation logic: an explicit allow overrides the implicit deny",
        [allow("dynamodb:GetItem", TABLE)],
        req("dynamodb:GetItem"),
        ALLOW,
    ),
    (
        "a deny beats an allow",
        "Evaluation logic: an explicit deny in any policy overrides any allows",
        [allow("dynamodb:*"), deny("dynamodb:GetItem")],
        req("dynamodb:GetItem"),
        DENY,
    ),
    (
        "another action",
        "Action element: a statement applies only to the actions it names",
        [allow("dynamodb:GetItem")],
        req("dynamodb:PutItem"),
        NONE,
    ),
    # --- Action, NotAction, wildcards
    (
        "action case",
        "Action element: the prefix and the action name are case insensitive",
        [allow("DynamoDB:getitem")],
        req("dynamodb:GetItem"),
        ALLOW,
    ),
    (
        "action wildcard",
        "Action element: wildcards (* ?) can be used in the action name",
        [allow("dynamodb:Get*")],
        req("dynamodb:GetItem"),
        ALLOW,
    ),
    (
        "action ?",
        "Action element: ? matches exactly one character",
        [allow("dynamodb:?etItem")],
        req("dynamodb:GetItem"),
        ALLOW,
    ),
    (
        "NotAction allow",
        "NotAction with Allow: allows every action except those listed",
        [{"Effect": "Allow", "NotAction": "dynamodb:DeleteItem", "Resource": "*"}],
        req("dynamodb:GetItem"),
        ALLOW,
    ),
    (
        "NotAction allow, the listed one",
        "NotAction with Allow: the listed actions are not allowed by it",
        [{"Effect": "Allow", "NotAction": "dynamodb:DeleteItem", "Resource": "*"}],
        req("dynamodb:DeleteItem"),
        NONE,
    ),
    (
        "NotAction deny",
        "NotAction with Deny: denies every action except those listed",
        [allow("dynamodb:*"), {"Effect": "Deny", "NotAction": "dynamodb:GetItem", "Resource": "*"}],
        req("dynamodb:PutItem"),
        DENY,
    ),
    # --- Resource, NotResource
    (
        "resource case",
        "Resource element: ARNs are case sensitive",
        [allow("dynamodb:GetItem", TABLE.replace("jobs", "JOBS"))],
        req("dynamodb:GetItem"),
        NONE,
    ),
    (
        "resource wildcard",
        "Resource element: wildcards match within the resource part",
        [allow("dynamodb:GetItem", f"arn:aws:dynamodb:*:{ACCOUNT}:table/j*")],
        req("dynamodb:GetItem"),
        ALLOW,
    ),
    (
        "NotResource allow",
        "NotResource with Allow: every resource except those listed",
        [{"Effect": "Allow", "Action": "dynamodb:GetItem", "NotResource": f"{TABLE}2"}],
        req("dynamodb:GetItem"),
        ALLOW,
    ),
    (
        "NotResource deny",
        "NotResource with Deny: denies on every resource except those listed",
        [allow("dynamodb:GetItem"), {"Effect": "Deny", "Action": "*", "NotResource": f"{TABLE}2"}],
        req("dynamodb:GetItem"),
        DENY,
    ),
    # --- condition operators and missing keys
    (
        "StringEquals",
        "Condition operators: StringEquals, exact match",
        [allow("s3:GetObject", condition={"StringEquals": {"aws:RequestedRegion": "us-east-1"}})],
        req("s3:GetObject", "*", aws__RequestedRegion=["us-east-1"]),
        ALLOW,
    ),
    (
        "key name case",
        "Condition element: condition key names are not case sensitive",
        [allow("s3:GetObject", condition={"StringEquals": {"AWS:requestedregion": "us-east-1"}})],
        req("s3:GetObject", "*", aws__RequestedRegion=["us-east-1"]),
        ALLOW,
    ),
    (
        "missing key",
        "Condition operators: a key not present in the request context makes the condition false",
        [allow("s3:GetObject", condition={"StringEquals": {"aws:SourceVpc": "vpc-1"}})],
        req("s3:GetObject", "*"),
        NONE,
    ),
    (
        "negated, missing key, allow",
        "Condition operators: if the condition requires that the key is not matched, such as StringNotLike, and the "
        "key is not present, the condition is true",
        [allow("s3:GetObject", condition={"StringNotEquals": {"aws:SourceVpc": "vpc-1"}})],
        req("s3:GetObject", "*"),
        ALLOW,
    ),
    (
        "negated, missing key, deny",
        "Condition operators: a negated operator on an absent key is true, so the Deny applies",
        [allow("s3:GetObject"), deny("s3:GetObject", condition={"ArnNotLike": {"aws:SourceArn": "arn:aws:sns:*"}})],
        req("s3:GetObject", "*"),
        DENY,
    ),
    (
        "StringNotEquals several values",
        "Condition operators: a negated operator holds when the value is none of them",
        [allow("s3:GetObject", condition={"StringNotEquals": {"aws:RequestedRegion": ["eu-west-1", "us-west-2"]}})],
        req("s3:GetObject", "*", aws__RequestedRegion=["us-east-1"]),
        ALLOW,
    ),
    (
        "StringNotEquals, one of them",
        "Condition operators: a value equal to one of a negated operator's values fails it",
        [allow("s3:GetObject", condition={"StringNotEquals": {"aws:RequestedRegion": ["us-east-1", "us-west-2"]}})],
        req("s3:GetObject", "*", aws__RequestedRegion=["us-east-1"]),
        NONE,
    ),
    (
        "StringLike",
        "Condition operators: StringLike, * and ? wildcards",
        [allow("s3:GetObject", condition={"StringLike": {"aws:PrincipalArn": "arn:aws:sts::*:assumed-role/api-*"}})],
        req("s3:GetObject", "*", aws__PrincipalArn=["arn:aws:sts::1:assumed-role/api-role/s"]),
        ALLOW,
    ),
    (
        "IfExists, absent",
        "...IfExists: if the key is not present, the condition is true",
        [allow("s3:GetObject", condition={"StringEqualsIfExists": {"aws:SourceVpc": "vpc-1"}})],
        req("s3:GetObject", "*"),
        ALLOW,
    ),
    (
        "IfExists, present",
        "...IfExists: if the key is present, it is evaluated as the operator says",
        [allow("s3:GetObject", condition={"StringEqualsIfExists": {"aws:SourceVpc": "vpc-1"}})],
        req("s3:GetObject", "*", aws__SourceVpc=["vpc-2"]),
        NONE,
    ),
    (
        "Null true",
        "Null: true when the key is absent",
        [allow("s3:GetObject", condition={"Null": {"aws:SourceVpc": "true"}})],
        req("s3:GetObject", "*"),
        ALLOW,
    ),
    (
        "Null false",
        "Null: false asks for the key to be present",
        [allow("s3:GetObject", condition={"Null": {"aws:SourceVpc": "false"}})],
        req("s3:GetObject", "*"),
        NONE,
    ),
    (
        "Bool",
        "Condition operators: Bool compares true/false",
        [deny("s3:*", condition={"Bool": {"aws:SecureTransport": "false"}}), allow("s3:GetObject")],
        req("s3:GetObject", "*", aws__SecureTransport=["true"]),
        ALLOW,
    ),
    (
        "Numeric",
        "Condition operators: NumericLessThan",
        [allow("s3:ListBucket", condition={"NumericLessThan": {"s3:max-keys": "10"}})],
        Request("s3:ListBucket", "*", {"s3:max-keys": ["5"]}),
        ALLOW,
    ),
    (
        "two keys, both must hold",
        "Condition element: every condition in the block must be true (AND)",
        [allow("s3:GetObject", condition={"StringEquals": {"aws:RequestedRegion": "us-east-1", "aws:SourceVpc": "v"}})],
        req("s3:GetObject", "*", aws__RequestedRegion=["us-east-1"]),
        NONE,
    ),
    # --- set operators on multivalued keys
    (
        "ForAllValues, empty",
        "Multivalued keys: ForAllValues returns true when the key is absent or empty",
        [allow("dynamodb:GetItem", condition={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["ADMISSION#*"]}})],
        req("dynamodb:GetItem"),
        ALLOW,
    ),
    (
        "ForAllValues, all",
        "Multivalued keys: ForAllValues, every request value matches a policy value",
        [allow("dynamodb:GetItem", condition={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["ADMISSION#*"]}})],
        req("dynamodb:GetItem", dynamodb__LeadingKeys=["ADMISSION#1", "ADMISSION#2"]),
        ALLOW,
    ),
    (
        "ForAllValues, one not",
        "Multivalued keys: ForAllValues fails when any request value matches none",
        [allow("dynamodb:GetItem", condition={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["ADMISSION#*"]}})],
        req("dynamodb:GetItem", dynamodb__LeadingKeys=["ADMISSION#1", "JOB#1"]),
        NONE,
    ),
    (
        "ForAnyValue, absent",
        "Multivalued keys: ForAnyValue returns false when the key is absent",
        [allow("dynamodb:GetItem", condition={"ForAnyValue:StringEquals": {"dynamodb:LeadingKeys": ["a"]}})],
        req("dynamodb:GetItem"),
        NONE,
    ),
    (
        "ForAnyValue, one",
        "Multivalued keys: ForAnyValue, at least one request value matches",
        [allow("dynamodb:GetItem", condition={"ForAnyValue:StringEquals": {"dynamodb:LeadingKeys": ["a"]}})],
        req("dynamodb:GetItem", dynamodb__LeadingKeys=["b", "a"]),
        ALLOW,
    ),
    (
        "ForAnyValue negated",
        "Multivalued keys: ForAnyValue:StringNotEquals, at least one request value is none of them",
        [allow("dynamodb:GetItem", condition={"ForAnyValue:StringNotEquals": {"dynamodb:LeadingKeys": ["a"]}})],
        req("dynamodb:GetItem", dynamodb__LeadingKeys=["a", "b"]),
        ALLOW,
    ),
    (
        "ForAllValues negated",
        "Multivalued keys: ForAllValues:StringNotEquals, every request value is none of them",
        [allow("dynamodb:GetItem", condition={"ForAllValues:StringNotEquals": {"dynamodb:LeadingKeys": ["a"]}})],
        req("dynamodb:GetItem", dynamodb__LeadingKeys=["a", "b"]),
        NONE,
    ),
    (
        "qualifier, multivalued",
        "Step Functions: states:StateMachineQualifier, ForAnyValue:StringEquals in AWS's example",
        [allow("states:StartExecution", SM, {"ForAnyValue:StringEquals": {"states:StateMachineQualifier": ["live"]}})],
        req("states:StartExecution", SM, states__StateMachineQualifier=["live"]),
        ALLOW,
    ),
]

#: Cases through the request as each service authorises it (resource and computed keys from the call itself).
CALL_CASES: list[tuple[str, str, list[dict[str, Any]], AwsCall, Decision]] = [
    (
        "Query on an index",
        "DynamoDB: a Query of an index is authorised on table/<t>/index/<i>",
        [allow("dynamodb:Query", TABLE)],
        AwsCall("K", REGION, "dynamodb", "Query", {"TableName": "jobs", "IndexName": "byDish"}),
        NONE,
    ),
    (
        "Query on an index, allowed",
        "DynamoDB: the index ARN (or table/<t>/index/*) grants it",
        [allow("dynamodb:Query", f"{TABLE}/index/*")],
        AwsCall("K", REGION, "dynamodb", "Query", {"TableName": "jobs", "IndexName": "byDish"}),
        ALLOW,
    ),
    (
        "Query LeadingKeys",
        "DynamoDB fine-grained access: LeadingKeys is the queried partition key value",
        [
            allow("dynamodb:Query", TABLE, {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["JOB#*"]}}),
            deny("dynamodb:Query", TABLE, {"Null": {"dynamodb:LeadingKeys": "true"}}),
        ],
        AwsCall(
            "K",
            REGION,
            "dynamodb",
            "Query",
            {
                "TableName": "jobs",
                "KeyConditionExpression": "#p = :v",
                "ExpressionAttributeNames": {"#p": "pk"},
                "ExpressionAttributeValues": {":v": {"S": "ADMISSION#1"}},
            },
        ),
        NONE,
    ),
    (
        "BatchWriteItem LeadingKeys",
        "DynamoDB fine-grained access: every put item's and delete key's partition key",
        [
            allow(
                "dynamodb:BatchWriteItem", TABLE, {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["ADMISSION#*"]}}
            )
        ],
        AwsCall(
            "K",
            REGION,
            "dynamodb",
            "BatchWriteItem",
            {
                "RequestItems": {
                    "jobs": [
                        {"PutRequest": {"Item": {"pk": {"S": "ADMISSION#1"}}}},
                        {"DeleteRequest": {"Key": {"pk": {"S": "JOB#1"}}}},
                    ]
                }
            },
        ),
        NONE,
    ),
    (
        "transaction",
        "DynamoDB transactions: ConditionCheck needs dynamodb:ConditionCheckItem",
        [allow(["dynamodb:PutItem"], TABLE)],
        AwsCall(
            "K",
            REGION,
            "dynamodb",
            "TransactWriteItems",
            {
                "TransactItems": [
                    {"Put": {"TableName": "jobs", "Item": {"pk": {"S": "a"}}}},
                    {"ConditionCheck": {"TableName": "jobs", "Key": {"pk": {"S": "b"}}}},
                ]
            },
        ),
        NONE,
    ),
    (
        "Invoke an alias, unqualified ARN",
        "Lambda: a policy on the unqualified ARN does not grant a qualified invoke",
        [allow("lambda:InvokeFunction", FN)],
        AwsCall("K", REGION, "lambda", "Invoke", {"FunctionName": "recipe", "Qualifier": "live"}),
        NONE,
    ),
    (
        "Invoke an alias, qualified",
        "Lambda: the alias's ARN (or function:<name>:*) grants it",
        [allow("lambda:InvokeFunction", f"{FN}:*")],
        AwsCall("K", REGION, "lambda", "Invoke", {"FunctionName": "recipe", "Qualifier": "live"}),
        ALLOW,
    ),
    (
        "StartExecution on an alias",
        "Step Functions: an alias is authorised on the state machine's ARN",
        [allow("states:StartExecution", SM, {"StringEquals": {"states:StateMachineQualifier": "live"}})],
        AwsCall("K", REGION, "states", "StartExecution", {"stateMachineArn": f"{SM}:live"}),
        ALLOW,
    ),
    (
        "StartExecution unqualified",
        "Step Functions: no qualifier, no states:StateMachineQualifier key",
        [allow("states:StartExecution", SM, {"StringEquals": {"states:StateMachineQualifier": "live"}})],
        AwsCall("K", REGION, "states", "StartExecution", {"stateMachineArn": SM}),
        NONE,
    ),
]


@pytest.mark.parametrize(("case", "source", "statements", "request_", "expected"), CASES, ids=[c[0] for c in CASES])
def test_the_judge_decides_as_iam(
    case: str, source: str, statements: list[dict[str, Any]], request_: Request, expected: Decision
) -> None:
    assert source
    assert evaluate(statements, request_)[0] == expected, case


@pytest.mark.parametrize(
    ("case", "source", "statements", "call", "expected"), CALL_CASES, ids=[c[0] for c in CALL_CASES]
)
def test_a_call_is_judged_as_its_service_authorises_it(
    case: str, source: str, statements: list[dict[str, Any]], call: AwsCall, expected: Decision
) -> None:
    checks = authorisations(call)
    decisions = [evaluate(statements, Request(c.action, c.resource, c.context))[0] for c in checks]
    decision = DENY if DENY in decisions else ALLOW if decisions and all(d == ALLOW for d in decisions) else NONE
    assert decision == expected, (case, [(c.action, c.resource, c.context) for c in checks])


def test_the_table_is_at_least_forty_cases_and_local_cloud_md_says_how_many() -> None:
    from stack_template import REPO_ROOT

    count = len(CASES) + len(CALL_CASES)
    assert count >= 40
    assert f"{count} cases" in (REPO_ROOT / "docs" / "local-runner.md").read_text()
