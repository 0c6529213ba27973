"""The local cloud's IAM: calls read as IAM reads them, resources named as each service authorises them,
policies evaluated as IAM evaluates them, and refusals answered so that botocore raises what it raises on AWS."""

from __future__ import annotations

from typing import Any

import botocore.parsers
import botocore.session
import pytest
from stack_template import Template
from urllib3 import HTTPHeaderDict

from chuixiang_local.cloud.iam.calls import AwsCall, parse_call
from chuixiang_local.cloud.iam.facts import COMPUTED_KEYS, UnknownAction, iam_action
from chuixiang_local.cloud.iam.gate import IamGate, Principal, denied_response
from chuixiang_local.cloud.iam.policy import Decision, Request, UnsupportedCondition, evaluate
from chuixiang_local.cloud.iam.roles import Role, log_delivery_refused

from ..support.iam_calls import authorisations

ACCOUNT, REGION = "123456789012", "us-east-1"
MACHINE = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:recipes"
TABLE = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/jobs"


def _auth(call: AwsCall) -> Any:
    """The one authorisation of a call on one resource."""
    return authorisations(call)[0]


def _call(service: str, operation: str, **params: Any) -> AwsCall:
    return AwsCall("AKID", REGION, service, operation, params)


def _decide(statements: list[dict[str, Any]], call: AwsCall) -> Decision:
    a = _auth(call)
    return evaluate(statements, Request(a.action, a.resource, a.context))[0]


# --- reading the request ------------------------------------------------------------------------------


def _environ(
    method: str,
    path: str,
    *,
    query: str = "",
    target: str | None = None,
    headers: dict[str, str] | None = None,
    service: str = "s3",
    body: bytes = b"",
) -> dict[str, Any]:
    env = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "HTTP_HOST": "127.0.0.1:5000",
        "HTTP_AUTHORIZATION": f"AWS4-HMAC-SHA256 Credential=local-Fn/20261202/{REGION}/{service}/aws4_request, "
        "SignedHeaders=host, Signature=0",
        "CONTENT_LENGTH": str(len(body)),
    }
    if target:
        env["HTTP_X_AMZ_TARGET"] = target
    for k, v in (headers or {}).items():
        env["HTTP_" + k.upper().replace("-", "_")] = v
    return env


def test_calls_are_read_by_each_protocol() -> None:
    json_call = parse_call(
        _environ("POST", "/", target="DynamoDB_20120810.GetItem", service="dynamodb"),
        b'{"TableName": "jobs", "Key": {"pk": {"S": "JOB#1"}}}',
    )
    assert json_call == AwsCall(
        "local-Fn", REGION, "dynamodb", "GetItem", {"TableName": "jobs", "Key": {"pk": {"S": "JOB#1"}}}
    )
    put = parse_call(_environ("PUT", "/images/images/a.png"), b"png")
    copy = parse_call(_environ("PUT", "/images/images/a.png", headers={"x-amz-copy-source": "x/y"}), b"")
    head = parse_call(_environ("HEAD", "/images/images/a.png"), b"")
    assert (put and put.operation, copy and copy.operation, head and head.operation) == (
        "PutObject",
        "CopyObject",
        "HeadObject",
    )
    assert put is not None and put.params == {"Bucket": "images", "Key": "images/a.png"}
    invoke = parse_call(
        _environ(
            "POST",
            f"/2015-03-31/functions/arn%3Aaws%3Alambda%3A{REGION}%3A{ACCOUNT}%3Afunction%3Asubmit%3A3/invocations",
            service="lambda",
        ),
        b"{}",
    )
    assert invoke is not None and (invoke.operation, invoke.params["FunctionName"]) == (
        "Invoke",
        f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:submit:3",
    )
    credential = f"X-Amz-Credential=local-Fn%2F20261202%2F{REGION}%2Fs3%2Faws4_request"
    presigned = parse_call(
        {**_environ("GET", "/images/images/a.png"), "HTTP_AUTHORIZATION": "", "QUERY_STRING": credential}, b""
    )
    assert presigned is not None and (presigned.access_key, presigned.operation) == ("local-Fn", "GetObject")
    assert parse_call({**_environ("GET", "/x"), "HTTP_AUTHORIZATION": ""}, b"") is None  # unsigned


# --- what IAM checks --------------------------------------------------------------------------------


def test_operations_map_to_the_action_iam_checks() -> None:
    assert iam_action("lambda", "Invoke") == "lambda:InvokeFunction"  # the privilege documented as Invoke's
    assert iam_action("s3", "HeadObject") == "s3:GetObject"
    assert iam_action("s3", "ListObjectsV2") == "s3:ListBucket"
    assert iam_action("dynamodb", "BatchGetItem") == "dynamodb:BatchGetItem"
    with pytest.raises(UnknownAction):
        iam_action("dynamodb", "NoSuchOperation")


def test_a_call_on_a_state_machine_alias_is_authorised_on_the_machine_with_the_qualifier_as_a_key() -> None:
    a = _auth(_call("states", "StartExecution", stateMachineArn=f"{MACHINE}:live", input="{}"))
    assert (a.action, a.resource, a.context["states:statemachinequalifier"]) == (
        "states:StartExecution",
        MACHINE,
        ["live"],
    )
    bare = _auth(_call("states", "StartExecution", stateMachineArn=MACHINE))
    assert bare.resource == MACHINE and "states:statemachinequalifier" not in bare.context


def test_the_first_deploys_api_policy_refused_every_start_and_the_fixed_one_allows_only_the_alias() -> None:
    """The review's finding: the api's role allowed StartExecution on "<machine>:live", which AWS never checks."""
    on_alias = _call("states", "StartExecution", stateMachineArn=f"{MACHINE}:live")
    old = [{"Effect": "Allow", "Action": "states:StartExecution", "Resource": f"{MACHINE}:live"}]
    assert _decide(old, on_alias) is Decision.IMPLICIT_DENY
    api = Template().resources["ApiFunction"]["Properties"]["Policies"][-1]["Statement"]
    fixed = [{**s, "Resource": MACHINE} for s in api if s["Action"] == "states:StartExecution"]
    assert _decide(fixed, on_alias) is Decision.ALLOW
    assert _decide(fixed, _call("states", "StartExecution", stateMachineArn=MACHINE)) is Decision.IMPLICIT_DENY
    assert _decide(fixed, _call("states", "StartExecution", stateMachineArn=f"{MACHINE}:7")) is Decision.IMPLICIT_DENY


def test_a_qualified_invoke_is_authorised_on_the_qualified_function_arn() -> None:
    function = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:submit"
    a = _auth(_call("lambda", "Invoke", FunctionName=f"{function}:3"))
    assert (a.action, a.resource) == ("lambda:InvokeFunction", f"{function}:3")
    assert _auth(_call("lambda", "Invoke", FunctionName="submit", Qualifier="live")).resource == f"{function}:live"
    sam_policy = [{"Effect": "Allow", "Action": ["lambda:InvokeFunction"], "Resource": f"{function}*"}]
    unqualified = [{"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": function}]
    assert _decide(sam_policy, _call("lambda", "Invoke", FunctionName=f"{function}:3")) is Decision.ALLOW
    assert _decide(unqualified, _call("lambda", "Invoke", FunctionName=f"{function}:3")) is Decision.IMPLICIT_DENY


def test_the_state_machine_may_delete_admission_slots_and_nothing_else() -> None:
    statement = {
        "Effect": "Allow",
        "Action": "dynamodb:DeleteItem",
        "Resource": TABLE,
        "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["ADMISSION#*"]}},
    }
    slot = _call("dynamodb", "DeleteItem", TableName="jobs", Key={"pk": {"S": "ADMISSION#2"}})
    job = _call("dynamodb", "DeleteItem", TableName="jobs", Key={"pk": {"S": "JOB#1"}})
    assert _auth(slot).context["dynamodb:leadingkeys"] == ["ADMISSION#2"]
    assert (_decide([statement], slot), _decide([statement], job)) == (Decision.ALLOW, Decision.IMPLICIT_DENY)


def test_s3_objects_and_secrets_are_named_by_their_arns() -> None:
    assert (
        _auth(_call("s3", "PutObject", Bucket="images", Key="images/a.png")).resource
        == "arn:aws:s3:::images/images/a.png"
    )
    secret = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:model-key-AbCdEf"
    assert _auth(_call("secretsmanager", "GetSecretValue", SecretId=secret)).resource == secret
    assert _auth(_call("dynamodb", "GetItem", TableName="jobs", Key={})).resource == TABLE


# --- IAM's evaluation ---------------------------------------------------------------------------------


def test_an_explicit_deny_wins_and_not_action_and_if_exists_read_as_iam_reads_them() -> None:
    request = Request("dynamodb:DeleteItem", TABLE, {})
    allow = {"Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"}
    deny = {"Effect": "Deny", "NotAction": ["dynamodb:GetItem"], "Resource": TABLE}
    assert evaluate([allow, deny], request)[0] is Decision.EXPLICIT_DENY
    assert evaluate([allow, deny], Request("dynamodb:GetItem", TABLE, {}))[0] is Decision.ALLOW
    guarded = {**allow, "Condition": {"StringEqualsIfExists": {"dynamodb:Select": "ALL_ATTRIBUTES"}}}
    assert evaluate([guarded], request)[0] is Decision.ALLOW  # the key is absent: IfExists holds
    on_key = {**allow, "Condition": {"StringEquals": {"dynamodb:Select": "ALL_ATTRIBUTES"}}}
    assert evaluate([on_key], request)[0] is Decision.IMPLICIT_DENY  # absent without IfExists: false
    with pytest.raises(UnsupportedCondition):
        evaluate([{**allow, "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}}], request)
    # A global key IAM sets on every request is never "absent": not computed here, it is refused loudly.
    with pytest.raises(UnsupportedCondition):
        evaluate([{**allow, "Condition": {"StringEqualsIfExists": {"aws:RequestedRegion": "cn-north-1"}}}], request)


def test_every_condition_key_the_template_uses_is_computed_or_never_reaches_the_local_cloud() -> None:
    """In the roles (resource policies are not judged locally). kms:ViaService guards kms:Decrypt of the model
    key's customer-managed key: no local call uses KMS."""
    roles = [
        r["Properties"].get("Policies", [])
        for r in Template().doc["Resources"].values()
        if r["Type"] in ("AWS::Serverless::Function", "AWS::Serverless::StateMachine")
    ]
    used = {key.lower() for _, leaf in _conditions(roles) for key in leaf}
    assert "states:statemachinequalifier" in used and "dynamodb:leadingkeys" in used
    assert used - COMPUTED_KEYS <= {"kms:viaservice"}, used - COMPUTED_KEYS


def _conditions(node: Any) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(node, list):
        return [c for item in node for c in _conditions(item)]
    if not isinstance(node, dict):
        return []
    found = (
        [(op, entries) for op, entries in node.get("Condition", {}).items()]
        if isinstance(node.get("Condition"), dict)
        else []
    )
    return found + [c for value in node.values() for c in _conditions(value)]


def test_a_state_machine_that_logs_needs_the_log_delivery_actions() -> None:
    statements = [s for s in Template().resources["RecipeStateMachine"]["Properties"]["Policies"][-1]["Statement"]]
    logs = [s for s in statements if str(s["Action"]).startswith("['logs:")]
    assert log_delivery_refused(Role("R", logs)) == []
    assert "logs:CreateLogDelivery" in log_delivery_refused(Role("R", []))


# --- refusals as AWS answers them ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("service", "model", "operation", "code"),
    [
        ("dynamodb", "dynamodb", "GetItem", "AccessDeniedException"),
        ("states", "stepfunctions", "StartExecution", "AccessDeniedException"),
        ("secretsmanager", "secretsmanager", "GetSecretValue", "AccessDeniedException"),
        ("lambda", "lambda", "Invoke", "AccessDeniedException"),
        ("s3", "s3", "PutObject", "AccessDenied"),
    ],
)
def test_a_refusal_is_the_error_botocore_parses_from_aws(service: str, model: str, operation: str, code: str) -> None:
    status, headers, body = denied_response(_call(service, operation), "User: x is not authorized")
    op = botocore.session.get_session().get_service_model(model).operation_model(operation)
    parser = botocore.parsers.create_parser(op.metadata["protocol"])
    parsed = parser.parse(
        {"status_code": int(status.split()[0]), "headers": HTTPHeaderDict(headers), "body": body},
        op.output_shape,  # type: ignore[arg-type]  # an error answer: botocore parses it without the shape
    )
    assert parsed["Error"]["Code"] == code and "not authorized" in parsed["Error"]["Message"]


def test_the_gate_judges_known_keys_and_lets_the_developer_through() -> None:
    gate = IamGate(lambda environ, start_response: [b"moto"], leading_key=lambda table: "pk")
    gate.register(
        "local-Fn", Principal("Role", "fn", [{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": TABLE}])
    )
    denied = gate.judge(AwsCall("local-Fn", REGION, "dynamodb", "PutItem", {"TableName": "jobs"}))
    assert denied is not None and "dynamodb:PutItem on resource: " + TABLE in denied.message
    assert gate.judge(AwsCall("local-Fn", REGION, "dynamodb", "GetItem", {"TableName": "jobs"})) is None
    assert gate.judge(AwsCall("testing", REGION, "dynamodb", "PutItem", {"TableName": "jobs"})) is None


def test_a_transaction_is_authorised_item_by_item_as_the_underlying_operations() -> None:
    """DynamoDB developer guide, *Using IAM with DynamoDB transactions*: Put, Update, Delete and Get need the
    underlying PutItem, UpdateItem, DeleteItem and GetItem; ConditionCheck needs dynamodb:ConditionCheckItem.
    There is no dynamodb:TransactWriteItems action, so a role without ConditionCheckItem cannot take a pass."""
    call = _call(
        "dynamodb",
        "TransactWriteItems",
        TransactItems=[
            {"Put": {"TableName": "jobs", "Item": {"pk": {"S": "ADMISSION#-1"}}}},
            {"ConditionCheck": {"TableName": "jobs", "Key": {"pk": {"S": "ADMISSION#0"}}}},
        ],
    )
    checks = authorisations(call)
    assert [(c.action, c.resource) for c in checks] == [
        ("dynamodb:PutItem", TABLE),
        ("dynamodb:ConditionCheckItem", TABLE),
    ]
    assert [c.context["dynamodb:leadingkeys"] for c in checks] == [["ADMISSION#-1"], ["ADMISSION#0"]]
    assert all(c.context["dynamodb:enclosingoperation"] == ["TransactWriteItems"] for c in checks)
    decision, _ = evaluate(
        [{"Effect": "Allow", "Action": ["dynamodb:PutItem"], "Resource": TABLE}],
        Request(checks[1].action, checks[1].resource, checks[1].context),
    )
    assert decision == Decision.IMPLICIT_DENY
