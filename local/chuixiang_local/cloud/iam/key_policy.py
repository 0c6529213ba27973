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
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .facts import principal_context
from .policy import Decision, Request, evaluate

#: What reading a secret under a customer-managed key needs of the key (Secrets Manager decrypts as the caller).
NEEDED = "kms:Decrypt"

_ACCOUNT_ID = re.compile(r"^[0-9]{12}$")


def url_suffix(partition: str) -> str:
    """``AWS::URLSuffix`` of a partition: service endpoints in China end in ``amazonaws.com.cn``."""
    return "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"


def kms_context(*, region: str, partition: str, account: str, role_arn: str, session: str) -> dict[str, list[str]]:
    """The context of the ``kms:Decrypt`` Secrets Manager makes for a role's ``GetSecretValue``: the global keys
    of the role's session, ``kms:ViaService`` (the partition's Secrets Manager endpoint) and ``kms:CallerAccount``
    (AWS KMS developer guide, *AWS KMS condition keys*)."""
    return {
        **principal_context(role_arn, session, account, region),
        "kms:viaservice": [f"secretsmanager.{region}.{url_suffix(partition)}"],
        "kms:calleraccount": [account],
    }


def secret_reader_statement(key_arn: str, region: str, partition: str) -> dict[str, Any]:
    """The identity statement the template gives a role that reads a secret under ``key_arn``."""
    return {
        "Effect": "Allow",
        "Action": NEEDED,
        "Resource": key_arn,
        "Condition": {"StringEquals": {"kms:ViaService": f"secretsmanager.{region}.{url_suffix(partition)}"}},
    }


def principal_arn(entry: str, partition: str) -> str:
    """A key policy's principal as KMS reads it: an account id is that account's root (IAM User Guide, *AWS
    JSON policy elements: Principal*: "You can specify the account ID ... or the account root ARN; they are
    equivalent"); anything else as written."""
    return f"arn:{partition}:iam::{entry}:root" if _ACCOUNT_ID.match(entry) else entry


def _listed(element: Any, partition: str) -> list[str]:
    if element == "*":
        return ["*"]
    if isinstance(element, Mapping):
        aws = element.get("AWS", [])
        return [principal_arn(str(p), partition) for p in (aws if isinstance(aws, list) else [aws])]
    return []


def _covers(statement: Mapping[str, Any], principal: str, partition: str) -> bool:
    """Whether the statement's ``Principal`` names ``principal`` (or everyone), or its ``NotPrincipal`` leaves
    it out ("the statement applies to every principal except those listed")."""
    if "NotPrincipal" in statement:
        return principal not in _listed(statement["NotPrincipal"], partition)
    listed = _listed(statement.get("Principal"), partition)
    return "*" in listed or principal in listed


def statements(policy: Mapping[str, Any] | str) -> list[dict[str, Any]]:
    doc = json.loads(policy) if isinstance(policy, str) else policy
    found = doc.get("Statement", [])
    return list(found) if isinstance(found, list) else [found]


def statements_for(
    all_statements: Iterable[Mapping[str, Any]], principal: str, partition: str = "aws"
) -> list[dict[str, Any]]:
    """The key policy's statements that apply to ``principal``, without their principal element."""
    return [
        {k: v for k, v in s.items() if k not in ("Principal", "NotPrincipal")}
        for s in all_statements
        if _covers(s, principal, partition)
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
    """Why KMS refuses ``request`` (a ``kms:Decrypt`` on the key) to ``role_arn``, or None when it allows it.
    The local cloud's gate and the deploy preflight both ask this, with :func:`kms_context`."""
    key_statements = statements(policy)
    direct = evaluate(statements_for(key_statements, role_arn, partition), request)[0]
    if direct is Decision.EXPLICIT_DENY:
        return "an explicit deny in the key policy"
    own = evaluate(list(identity), request)[0]
    if own is Decision.EXPLICIT_DENY:
        return "an explicit deny in an identity-based policy"
    if direct is Decision.ALLOW:
        return None
    root = account_root(account, partition)
    delegated = evaluate(statements_for(key_statements, root, partition), request)[0]
    if delegated is not Decision.ALLOW:
        return "the key policy neither allows the role nor enables IAM policies (allows the account)"
    if own is not Decision.ALLOW:
        return f"no identity-based policy allows the {NEEDED} action"
    return None
