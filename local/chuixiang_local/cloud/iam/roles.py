"""Each function's and the state machine's role as the template defines it after SAM's transform: the
inline policies SAM wrote (policy templates such as ``LambdaInvokePolicy`` expanded), resolved against the
local deployment's names and parameters (``Fn::If`` by its Conditions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stack_template import ConfigError, Template

from .policy import Decision, Request, evaluate, grammar_problems, statements_of

#: The resources that run with a role, and the property that names it.
_ROLE_PROPERTY = {"AWS::Lambda::Function": "Role", "AWS::StepFunctions::StateMachine": "RoleArn"}


@dataclass(frozen=True)
class Role:
    logical_id: str  #: the role's logical id in the transformed template (``ApiFunctionRole``)
    statements: list[dict[str, Any]] = field(default_factory=list)  #: every inline policy's, in order
    #: AWS managed policies attached by name (AWSLambdaBasicExecutionRole…). Their documents are AWS's and
    #: not in the template; they grant the runtime's log and trace writes, which are no SDK call here.
    managed: list[str] = field(default_factory=list)


def roles(transformed: dict[str, Any], template: Template) -> dict[str, Role]:
    """``{logical id of a function or the state machine: its role}``."""
    out = {}
    for lid, resource in transformed.items():
        prop = _ROLE_PROPERTY.get(resource["Type"])
        if prop is None:  # a conditional one (the canary) too: the local cloud deploys every function
            continue
        role_lid = resource["Properties"][prop]["Fn::GetAtt"][0]
        role = transformed[role_lid]["Properties"]
        # A policy may be conditional as a whole (``Fn::If`` with ``AWS::NoValue``: the synthetic job's token).
        policies = template.resolve(role.get("Policies", []))
        statements = [dict(s) for policy in policies if policy for s in statements_of(policy["PolicyDocument"])]
        malformed = [f"{p}" for statement in statements for p in grammar_problems(statement)]
        if malformed:  # what CloudFormation's create of the role would fail on
            raise ConfigError(f"{role_lid}: MalformedPolicyDocument: {'; '.join(malformed)}")
        out[lid] = Role(role_lid, statements, [str(template.resolve(a)) for a in role.get("ManagedPolicyArns", [])])
    return out


#: What CreateStateMachine requires of the role of a state machine that logs to CloudWatch Logs (Step
#: Functions developer guide, "IAM policies for logging to CloudWatch Logs"); without them it fails with
#: InvalidLoggingConfiguration ("The state machine IAM Role is not authorized to access the Log Destination").
LOG_DELIVERY_ACTIONS = (
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
)


def log_delivery_refused(role: Role) -> list[str]:
    """The log delivery actions ``role`` is not allowed (empty: a state machine with logging can be created)."""
    return [
        action
        for action in LOG_DELIVERY_ACTIONS
        if evaluate(role.statements, Request(action, "*", {}))[0] is not Decision.ALLOW
    ]
