"""IAM's evaluation of identity-based policies, as the IAM User Guide's policy evaluation logic states it:
an explicit ``Deny`` in any statement that applies wins; else an ``Allow`` that applies allows; else the
request is implicitly denied. A statement applies when its ``Action`` (or ``NotAction``), its ``Resource``
(or ``NotResource``) and every condition of its ``Condition`` block match the request.

Conditions: the operators of the IAM reference's condition operator table (string, ARN, numeric, boolean,
``Null``), their ``IfExists`` forms and the ``ForAnyValue:``/``ForAllValues:`` set qualifiers. A key the
request does not carry makes its condition false, except where IAM says true: a negated operator
(``StringNotEquals``…), ``…IfExists`` and ``ForAllValues:`` (``Null`` tests presence itself).
An operator not listed here is refused loudly (:class:`UnsupportedCondition`), never read as a match; so is a
condition on a global ``aws:`` key the request does not carry unless IAM documents it as absent for a role
session calling a service directly (:data:`GLOBAL_KEYS_ABSENT`): a Deny on ``aws:PrincipalTag/team`` must not
pass for want of the tag.

A policy IAM would refuse (:func:`grammar_problems`: an ``Effect`` other than ``Allow``/``Deny``, no
``Action``/``NotAction``, no ``Resource``/``NotResource`` in an identity policy, an unknown operator) is
CloudFormation's ``MalformedPolicyDocument``: the local cloud refuses to deploy it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Decision(Enum):
    ALLOW = "allow"
    EXPLICIT_DENY = "explicit deny"
    IMPLICIT_DENY = "implicit deny"


class UnsupportedCondition(Exception):
    """A condition operator this evaluator does not implement: the policy cannot be judged locally."""


@dataclass(frozen=True)
class Request:
    """What IAM judges: the action (``service:Action``), the resource ARN as the service authorises it, and
    the condition keys the request carries (lower-cased names; each value a list, as multivalued keys are)."""

    action: str
    resource: str
    context: Mapping[str, list[str]]


def _wildcard(pattern: str, value: str, *, case_sensitive: bool) -> bool:
    """IAM's ``*`` and ``?`` (no other glob syntax: ``[`` is a literal)."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, 0 if case_sensitive else re.IGNORECASE) is not None


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def action_matches(patterns: Any, action: str) -> bool:
    return any(_wildcard(str(p), action, case_sensitive=False) for p in _as_list(patterns))


def _arn_matches(pattern: str, arn: str) -> bool:
    """ARN matching: each of the six colon-separated parts matched on its own, wildcards within a part
    (the resource part keeps its colons: ``stateMachine:name:live``)."""
    if pattern == "*":
        return True
    p_parts, a_parts = pattern.split(":", 5), arn.split(":", 5)
    if len(p_parts) != 6 or len(a_parts) != 6:
        return _wildcard(pattern, arn, case_sensitive=True)
    return all(_wildcard(p, a, case_sensitive=True) for p, a in zip(p_parts, a_parts, strict=True))


def resource_matches(patterns: Any, resource: str) -> bool:
    return any(_arn_matches(str(p), resource) for p in _as_list(patterns))


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _bool(text: str) -> str:
    return text.lower()


_OPERATORS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda v, p: v == p,
    "StringNotEquals": lambda v, p: v != p,
    "StringEqualsIgnoreCase": lambda v, p: v.lower() == p.lower(),
    "StringNotEqualsIgnoreCase": lambda v, p: v.lower() != p.lower(),
    "StringLike": lambda v, p: _wildcard(p, v, case_sensitive=True),
    "StringNotLike": lambda v, p: not _wildcard(p, v, case_sensitive=True),
    "ArnEquals": lambda v, p: _arn_matches(p, v),
    "ArnLike": lambda v, p: _arn_matches(p, v),
    "ArnNotEquals": lambda v, p: not _arn_matches(p, v),
    "ArnNotLike": lambda v, p: not _arn_matches(p, v),
    "Bool": lambda v, p: _bool(v) == _bool(p),
    "NumericEquals": lambda v, p: _num(v) is not None and _num(v) == _num(p),
    "NumericNotEquals": lambda v, p: _num(v) is not None and _num(v) != _num(p),
    "NumericLessThan": lambda v, p: (a := _num(v)) is not None and (b := _num(p)) is not None and a < b,
    "NumericLessThanEquals": lambda v, p: (a := _num(v)) is not None and (b := _num(p)) is not None and a <= b,
    "NumericGreaterThan": lambda v, p: (a := _num(v)) is not None and (b := _num(p)) is not None and a > b,
    "NumericGreaterThanEquals": lambda v, p: (a := _num(v)) is not None and (b := _num(p)) is not None and a >= b,
}
#: Negated operators: the condition holds when the value matches *none* of the policy's values.
_NEGATED = {name for name in _OPERATORS if "Not" in name}


def _matches(op: str, value: str, wanted: list[str]) -> bool:
    """One request value against the policy's values: it matches any of them; for a negated operator it
    matches when it equals (is like) none of them ("StringNotEquals" with several values: not any of them)."""
    test = _OPERATORS[op]
    if op in _NEGATED:
        return all(test(value, w) for w in wanted)
    return any(test(value, w) for w in wanted)


#: Global keys IAM documents as absent from a request a role session makes to a service directly (not through
#: another service, not from a VPC endpoint, not as an IAM user): a condition on them finds them absent.
#: IAM User Guide, *AWS global condition context keys*, each key's "Availability".
GLOBAL_KEYS_ABSENT = frozenset(
    {
        "aws:sourcearn",  # "only when a call to your resource is being made directly by an AWS service principal"
        "aws:sourceaccount",
        "aws:sourceorgid",
        "aws:sourceorgpaths",
        "aws:calledvia",  # "only if a service that supports aws:CalledVia uses the credentials of an IAM principal"
        "aws:calledviafirst",
        "aws:calledvialast",
        "aws:username",  # "not present for IAM roles"
        "aws:sourcevpc",  # "only if the request is made through a VPC endpoint"
        "aws:sourcevpce",
        "aws:vpcsourceip",
    }
)


def _refuse_uncomputed(key: str, context: Mapping[str, list[str]]) -> None:
    name = key.lower()
    if name.startswith("aws:") and name not in context and name not in GLOBAL_KEYS_ABSENT:
        raise UnsupportedCondition(
            f"a condition on {key!r}, a global key IAM may set on this request, which is not computed locally"
        )


def condition_holds(operator: str, key: str, wanted: Any, context: Mapping[str, list[str]]) -> bool:
    """One ``operator: {key: wanted}`` entry of a Condition block."""
    qualifier, _, op = operator.rpartition(":")
    if_exists = op.endswith("IfExists")
    op = op.removesuffix("IfExists")
    wanted_values = [str(w).lower() if isinstance(w, bool) else str(w) for w in _as_list(wanted)]
    _refuse_uncomputed(key, context)
    values = context.get(key.lower())
    if op == "Null":  # "true": the key is absent; "false": present
        return (values is None) == (wanted_values[0].lower() == "true")
    if op not in _OPERATORS or qualifier not in ("", "ForAnyValue", "ForAllValues"):
        raise UnsupportedCondition(f"condition operator {operator!r} is not evaluated locally")
    if values is None:
        # IAM User Guide, condition operators: "If the key that you specify in a policy condition is not present
        # in the request context, the values do not match and the condition is false. If the policy condition
        # requires that the key is not matched, such as StringNotLike or ArnNotLike, and the right key is not
        # present, the condition is true." ForAllValues: true for a missing key; ForAnyValue: false; IfExists:
        # true.
        if qualifier:
            return qualifier == "ForAllValues"
        return if_exists or op in _NEGATED
    if qualifier == "ForAllValues":  # every request value matches (an empty set: true)
        return all(_matches(op, v, wanted_values) for v in values)
    if qualifier == "ForAnyValue":  # at least one request value matches (a negated operator: is none of them)
        return any(_matches(op, v, wanted_values) for v in values)
    # No set qualifier: a single-valued key's value; a negated operator holds when no value matches.
    if op in _NEGATED:
        return all(_matches(op, v, wanted_values) for v in values)
    return any(_matches(op, v, wanted_values) for v in values)


def conditions_hold(block: Mapping[str, Mapping[str, Any]] | None, context: Mapping[str, list[str]]) -> bool:
    return all(
        condition_holds(op, key, wanted, context)
        for op, entries in (block or {}).items()
        for key, wanted in entries.items()
    )


def applies(statement: Mapping[str, Any], request: Request) -> bool:
    """A statement without an action or a resource element (or with both of a pair) is none IAM accepts: it
    applies to nothing, never to everything."""
    for pair in (("Action", "NotAction"), ("Resource", "NotResource")):
        if (pair[0] in statement) == (pair[1] in statement):
            return False
    if "Action" in statement and not action_matches(statement["Action"], request.action):
        return False
    if "NotAction" in statement and action_matches(statement["NotAction"], request.action):
        return False
    if "Resource" in statement and not resource_matches(statement["Resource"], request.resource):
        return False
    if "NotResource" in statement and resource_matches(statement["NotResource"], request.resource):
        return False
    return conditions_hold(statement.get("Condition"), request.context)


def evaluate(statements: Iterable[Mapping[str, Any]], request: Request) -> tuple[Decision, Mapping[str, Any] | None]:
    """The decision, and the statement that made it (None for an implicit deny)."""
    allowed_by = None
    for statement in statements:
        if not applies(statement, request):
            continue
        if statement.get("Effect") == "Deny":
            return Decision.EXPLICIT_DENY, statement
        if statement.get("Effect") == "Allow":  # anything else is no statement IAM accepts (grammar_problems)
            allowed_by = allowed_by or statement
    return (Decision.ALLOW, allowed_by) if allowed_by is not None else (Decision.IMPLICIT_DENY, None)


def _operator_known(operator: str) -> bool:
    qualifier, _, op = operator.rpartition(":")
    op = op.removesuffix("IfExists")
    return qualifier in ("", "ForAnyValue", "ForAllValues") and (op in _OPERATORS or op == "Null")


def grammar_problems(statement: Mapping[str, Any], *, identity: bool = True) -> list[str]:
    """Why IAM would refuse ``statement`` as written (IAM User Guide, *IAM JSON policy elements*): ``Effect``
    "Valid values for Effect are Allow and Deny. The Effect value is case sensitive"; each statement "must
    include either an Action or NotAction element", and in an identity policy "either a Resource or a
    NotResource element"; never both of a pair; no ``Principal`` in an identity policy; known operators only."""
    problems = []
    if statement.get("Effect") not in ("Allow", "Deny"):
        problems.append(f"Effect {statement.get('Effect')!r} is neither Allow nor Deny (case-sensitive)")
    for pair in (("Action", "NotAction"), ("Resource", "NotResource")):
        present = [k for k in pair if k in statement]
        if len(present) == 2:
            problems.append(f"both {pair[0]} and {pair[1]}")
        elif not present and (pair[0] == "Action" or identity):
            problems.append(f"neither {pair[0]} nor {pair[1]}")
    if identity and ("Principal" in statement or "NotPrincipal" in statement):
        problems.append("a Principal in an identity-based policy")
    problems += [
        f"unknown condition operator {op!r}" for op in statement.get("Condition", {}) if not _operator_known(op)
    ]
    return problems


def statements_of(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A policy document's statements (``Statement`` may be one object or a list)."""
    return _as_list(document.get("Statement", []))


__all__ = ["Decision", "Request", "UnsupportedCondition", "evaluate", "grammar_problems", "statements_of"]
