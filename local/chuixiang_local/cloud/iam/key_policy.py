"""KMS's judgement of a ``kms:Decrypt`` a role makes through Secrets Manager, key policy and identity policy together.

AWS KMS developer guide, *Key policies*: "Unless the key policy explicitly allows it, you cannot use IAM policies
to allow access to a KMS key." So a role may decrypt when the key policy allows the role itself, or when it
enables IAM policies (allows the account, ``arn:<partition>:iam::<account>:root``, as the default key policy
does) *and* the role's own policies allow it; an explicit deny in either wins (*Determining access to a KMS key*).
Used by the local cloud's IAM gate on every ``GetSecretValue`` of a secret under a customer-managed key, and by
the deploy preflight on the real key's policy.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .policy import Decision, Request, evaluate

#: What reading a secret under a customer-managed key needs of the key (Secrets Manager decrypts as the caller).
NEEDED = "kms:Decrypt"


def _principals(statement: Mapping[str, Any]) -> list[str]:
    principal = statement.get("Principal")
    if principal == "*":
        return ["*"]
    if isinstance(principal, Mapping):
        aws = principal.get("AWS", [])
        return [str(p) for p in (aws if isinstance(aws, list) else [aws])]
    return []


def statements(policy: Mapping[str, Any] | str) -> list[dict[str, Any]]:
    doc = json.loads(policy) if isinstance(policy, str) else policy
    found = doc.get("Statement", [])
    return list(found) if isinstance(found, list) else [found]


def statements_for(all_statements: Iterable[Mapping[str, Any]], principal: str) -> list[dict[str, Any]]:
    """The key policy's statements that name ``principal`` (or everyone), without their Principal element."""
    return [
        {k: v for k, v in s.items() if k != "Principal"}
        for s in all_statements
        if principal in _principals(s) or "*" in _principals(s)
    ]


def account_root(account: str, partition: str) -> str:
    return f"arn:{partition}:iam::{account}:root"


def decrypt_refusal(
    policy: Mapping[str, Any] | str,
    request: Request,
    *,
    role_arn: str,
    account: str,
    partition: str,
    identity: Sequence[Mapping[str, Any]],
) -> str | None:
    """Why KMS refuses ``request`` (a ``kms:Decrypt`` on the key) to ``role_arn``, or None when it allows it."""
    key_statements = statements(policy)
    direct = evaluate(statements_for(key_statements, role_arn), request)[0]
    if direct is Decision.EXPLICIT_DENY:
        return "an explicit deny in the key policy"
    own = evaluate(list(identity), request)[0]
    if own is Decision.EXPLICIT_DENY:
        return "an explicit deny in an identity-based policy"
    if direct is Decision.ALLOW:
        return None
    delegated = evaluate(statements_for(key_statements, account_root(account, partition)), request)[0]
    if delegated is not Decision.ALLOW:
        return "the key policy neither allows the role nor enables IAM policies (allows the account)"
    if own is not Decision.ALLOW:
        return f"no identity-based policy allows the {NEEDED} action"
    return None
