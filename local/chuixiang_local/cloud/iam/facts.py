"""What IAM checks for one API call: the action, the resource ARN as the service authorises it, and the
condition keys the request carries.

IAM's facts come from policy_sentry's database (the Service Authorization Reference, parsed and shipped
with each policy_sentry release): which action an operation needs (its privilege, or the privilege whose
documentation is the operation's API page, as ``lambda:InvokeFunction`` is ``Invoke``'s), which resource
types and ARN formats that action takes, which condition keys apply. Chosen over parliament (whose copy of
the same database is older and whose API lints rather than queries) and over a hand-written table (which
would be right only for the calls someone thought of). The rules the database cannot say are below, each
with the AWS documentation that states it (:data:`DOCUMENTED_ACTIONS`, :func:`_service_rules`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from policy_sentry.shared.iam_data import get_service_prefix_data

from .calls import AwsCall

#: Operations that need another operation's action (no privilege of their own, none documented as theirs).
#: S3 API Reference, HeadObject: "you must have the s3:GetObject permission"; HeadBucket: "s3:ListBucket".
DOCUMENTED_ACTIONS = {("s3", "HeadObject"): "GetObject", ("s3", "HeadBucket"): "ListBucket"}

#: The condition keys computed from a request here. A policy condition on any other service key finds it
#: absent, as IAM does when a request does not carry a key (false, or true under ForAllValues / IfExists); a
#: condition on a global ``aws:`` key not computed here is refused loudly (:data:`policy.GLOBAL_KEYS_COMPUTED`).
COMPUTED_KEYS = frozenset(
    {
        "aws:requestedregion",
        "aws:securetransport",
        "aws:principalarn",
        "aws:principalaccount",
        "aws:principaltype",
        "aws:principalisawsservice",
        "aws:viaawsservice",
        "aws:userid",
        "states:statemachinequalifier",
        "dynamodb:leadingkeys",
    }
)


def principal_context(role_arn: str, session: str, account: str, region: str) -> dict[str, list[str]]:
    """The global keys IAM sets on every request a Lambda function's or a state machine's role session makes
    (IAM User Guide, *AWS global condition context keys*, each key's "Availability"):

    * ``aws:PrincipalArn``: the role's ARN, not the session's ("For IAM roles, the request context returns the
      ARN of the role, not the ARN of the user that assumed the role");
    * ``aws:PrincipalAccount``, ``aws:PrincipalType`` (``AssumedRole``), ``aws:userid`` (``role-id:session``;
      the role's unique id is AWS's, so the role's name stands for it here), ``aws:RequestedRegion``;
    * ``aws:PrincipalIsAWSService`` and ``aws:ViaAWSService``: ``false`` (the function calls the service itself);
    * ``aws:SecureTransport``: ``true`` (every SDK call from Lambda is HTTPS; locally, loopback HTTP).
    """
    return {
        "aws:principalarn": [role_arn],
        "aws:principalaccount": [account],
        "aws:principaltype": ["AssumedRole"],
        "aws:userid": [f"{role_arn.rsplit('/', 1)[-1]}:{session}"],
        "aws:principalisawsservice": ["false"],
        "aws:viaawsservice": ["false"],
        "aws:requestedregion": [region],
        "aws:securetransport": ["true"],
    }


class UnknownAction(Exception):
    """No IAM action is known for an operation: refused, never guessed."""


@dataclass(frozen=True)
class Authorisation:
    action: str
    resource: str
    context: dict[str, list[str]] = field(default_factory=dict)


@functools.cache
def _service(prefix: str) -> dict[str, Any]:
    try:
        return get_service_prefix_data(prefix)
    except Exception as exc:  # policy_sentry raises bare Exceptions for an unknown prefix
        raise UnknownAction(f"no IAM service {prefix!r} in policy_sentry's database") from exc


@functools.cache
def iam_action(prefix: str, operation: str) -> str:
    """``service:Privilege`` an operation needs."""
    privileges = _service(prefix)["privileges"]
    if operation in privileges:
        return f"{prefix}:{operation}"
    documented = [
        name
        for name, p in privileges.items()
        if (p.get("api_documentation_link") or "").endswith(f"/API_{operation}.html")
    ]
    if len(documented) == 1:
        return f"{prefix}:{documented[0]}"
    if (prefix, operation) in DOCUMENTED_ACTIONS:
        return f"{prefix}:{DOCUMENTED_ACTIONS[(prefix, operation)]}"
    raise UnknownAction(f"no IAM action known for {prefix} {operation or '(an unrecognised request)'}")


def _candidates(placeholder: str) -> list[str]:
    """Request parameters that may hold a placeholder's value: ``TableName``, ``BucketName`` → ``Bucket``,
    ``ObjectName`` → ``Key``, ``StateMachineName`` → ``stateMachineArn``."""
    base = placeholder.removesuffix("Name").removesuffix("Id")
    camel = base[:1].lower() + base[1:]
    return [placeholder, base, f"{camel}Arn", f"{base}Arn", *(["Key"] if placeholder == "ObjectName" else [])]


def _fill(arn_format: str, call: AwsCall, account: str, partition: str, prefix: str) -> str | None:
    """The format with each placeholder from the call; a parameter that is itself this service's ARN names
    the resource whole (``FunctionName`` may be a qualified function ARN, ``SecretId`` a secret's ARN)."""
    fixed = {"Partition": partition, "Region": call.region, "Account": account}
    values: dict[str, str] = {}
    for placeholder in re.findall(r"\$\{(\w+)\}", arn_format):
        if placeholder in fixed:
            values[placeholder] = fixed[placeholder]
            continue
        value: str | None = next(
            (str(call.params[c]) for c in _candidates(placeholder) if isinstance(call.params.get(c), str)), None
        )
        if value is None:
            return None
        if value.startswith(f"arn:{partition}:{prefix}:"):
            return value
        values[placeholder] = value
    return re.sub(r"\$\{(\w+)\}", lambda m: values[m.group(1)], arn_format)


def resource_of(call: AwsCall, action: str, account: str, partition: str) -> str:
    """The resource ARN of the call: the first of the action's resource types (required ones first) whose
    format the call's parameters fill; ``*`` for an action that takes no resource type."""
    prefix, _, privilege = action.partition(":")
    service = _service(prefix)
    types = service["privileges"][privilege]["resource_types"]
    ordered = sorted((t for t in types.values() if t["resource_type"]), key=lambda t: not t["required"])
    for resource_type in ordered:
        arn_format = service["resources"][resource_type["resource_type"]]["arn"]
        filled = _fill(arn_format, call, account, partition, prefix)
        if filled is not None:
            return filled
    if any(t["required"] for t in ordered):
        raise UnknownAction(f"{action}: no resource of {[t['resource_type'] for t in ordered]} named by the call")
    return "*"


def _service_rules(
    call: AwsCall, resource: str, context: dict[str, list[str]], leading_key: Callable[[str], str | None]
) -> str:
    """What each service documents about the resource and keys it authorises (the database cannot say it)."""
    if call.service == "states" and re.fullmatch(r"arn:[^:]+:states:[^:]*:\d+:stateMachine:[^:]+:[^:]+", resource):
        # Step Functions guide, "Authorization for versions and aliases": "To authorize a version or an alias
        # to invoke an API action, Step Functions uses the state machine's ARN instead of using the version
        # ARN or alias ARN"; the version or alias is the condition key states:StateMachineQualifier.
        resource, qualifier = resource.rsplit(":", 1)
        context["states:statemachinequalifier"] = [qualifier]
    if call.service == "lambda" and isinstance(call.params.get("Qualifier"), str) and resource.count(":") == 6:
        resource = f"{resource}:{call.params['Qualifier']}"  # Invoke ?Qualifier=: the version's or alias's ARN
    if call.service == "dynamodb":
        keys = _leading_keys(call.params, leading_key)
        if keys:  # DynamoDB developer guide, fine-grained access control: the partition key values
            context["dynamodb:leadingkeys"] = keys
        index = call.params.get("IndexName")
        if isinstance(index, str) and re.fullmatch(r"arn:[^:]+:dynamodb:[^:]*:\d+:table/[^/]+", resource):
            # DynamoDB developer guide, "Using IAM policies with DynamoDB": a Query or Scan of an index is
            # authorised on the index's ARN, table/<name>/index/<index>, not the table's.
            resource = f"{resource}/index/{index}"
    return resource


def _leading_keys(params: dict[str, Any], leading_key: Callable[[str], str | None]) -> list[str]:
    """The partition key values a call touches (``dynamodb:LeadingKeys``): its Key or Item, a batch's keys
    and items (BatchGetItem's Keys, BatchWriteItem's put items and delete keys), a Query's partition key."""
    table = params.get("TableName")
    name = leading_key(table) if isinstance(table, str) else None
    items = [params.get("Key"), params.get("Item")]
    for other, spec in (params.get("RequestItems") or {}).items():  # one table per call here
        name = name or leading_key(other)
        if isinstance(spec, dict):  # BatchGetItem
            items.extend(spec.get("Keys", []))
        elif isinstance(spec, list):  # BatchWriteItem
            for write in spec:
                put, delete = (write or {}).get("PutRequest") or {}, (write or {}).get("DeleteRequest") or {}
                items.extend([put.get("Item"), delete.get("Key")])
    values = []
    for item in items:
        value = item.get(name) if isinstance(item, dict) and name else None
        if isinstance(value, dict) and value:
            values.append(str(next(iter(value.values()))))
    if name and not values:
        values = _queried_partition(params, name)
    return values


def _queried_partition(params: dict[str, Any], name: str) -> list[str]:
    """A Query's partition key value: ``KeyConditionExpression`` ``#k = :v`` (or ``k = :v``), or the legacy
    ``KeyConditions``."""
    legacy = (params.get("KeyConditions") or {}).get(name)
    if isinstance(legacy, dict):
        return [str(next(iter(v.values()))) for v in legacy.get("AttributeValueList", [])[:1] if isinstance(v, dict)]
    expression = params.get("KeyConditionExpression")
    if not isinstance(expression, str):
        return []
    names = {k: v for k, v in (params.get("ExpressionAttributeNames") or {}).items()}
    values = params.get("ExpressionAttributeValues") or {}
    for left, right in re.findall(r"([#\w]+)\s*=\s*(:\w+)", expression):
        if names.get(left, left) == name and isinstance(values.get(right), dict):
            return [str(next(iter(values[right].values())))]
    return []


#: DynamoDB's transactions have no IAM action of their own: "Permissions for Put, Update, Delete, and Get actions
#: are governed by the permissions used for the underlying PutItem, UpdateItem, DeleteItem, and GetItem
#: operations. For the ConditionCheck action, you can use the dynamodb:ConditionCheckItem permission" (DynamoDB
#: developer guide, *Using IAM with DynamoDB transactions*). The key dynamodb:EnclosingOperation names the call.
TRANSACTIONS = ("TransactWriteItems", "TransactGetItems")
_TRANSACTION_OPERATIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "Get": "GetItem",
    "ConditionCheck": "ConditionCheckItem",
}


def _transaction_items(call: AwsCall) -> list[AwsCall]:
    """A transaction's items, each as the call IAM authorises it as."""
    out = []
    for element in call.params.get("TransactItems") or []:
        for kind, body in element.items():
            out.append(AwsCall(call.access_key, call.region, call.service, _TRANSACTION_OPERATIONS[kind], body))
    return out


def authorisation_of(
    call: AwsCall,
    *,
    principal_arn: str,
    account: str,
    partition: str,
    leading_key: Callable[[str], str | None],
    session: str = "session",
) -> list[Authorisation]:
    """What IAM checks, once per resource the call acts on: a batch call on several tables (DynamoDB's
    ``RequestItems``) is authorised on each, a transaction on each of its items. ``leading_key(table)``: the
    table's partition key attribute."""
    if call.service == "dynamodb" and call.operation in TRANSACTIONS:
        return [
            Authorisation(a.action, a.resource, {**a.context, "dynamodb:enclosingoperation": [call.operation]})
            for one in _transaction_items(call)
            for a in authorisation_of(
                one,
                principal_arn=principal_arn,
                account=account,
                partition=partition,
                leading_key=leading_key,
                session=session,
            )
        ]
    action = iam_action(call.service, call.operation)
    batch = call.params.get("RequestItems")
    calls = (
        [call]
        if not isinstance(batch, dict) or "TableName" in call.params
        else [
            AwsCall(
                call.access_key,
                call.region,
                call.service,
                call.operation,
                {**call.params, "TableName": table, "RequestItems": {table: spec}},
            )
            for table, spec in batch.items()
        ]
    )
    out = []
    for one in calls:
        context = principal_context(principal_arn, session, account, one.region)
        resource = _service_rules(one, resource_of(one, action, account, partition), context, leading_key)
        out.append(Authorisation(action, resource, context))
    return out
