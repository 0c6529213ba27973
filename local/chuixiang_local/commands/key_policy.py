"""Whether the model secret's customer-managed KMS key lets the functions read the secret.

With ``ModelApiKeyKmsKeyArn`` set, the recipe, image and canary functions decrypt the secret through Secrets
Manager, and the roles' ``kms:Decrypt`` statement is only half of it: "Unless the key policy explicitly allows
it, you cannot use IAM policies to allow access to a KMS key" (AWS KMS developer guide, *Key policies*). The key
policy must either enable IAM policies (a statement allowing the account, ``arn:<partition>:iam::<account>:root``,
as the default key policy does) or allow the roles themselves. Otherwise every ``GetSecretValue`` fails and every
job with it: the preflight (``chuixiang ladder --account``) refuses the deploy instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chuixiang_local.cloud.iam.key_policy import NEEDED, account_root, statements, statements_for
from chuixiang_local.cloud.iam.policy import Decision, Request, evaluate


def key_policy_problems(
    policy: Mapping[str, Any] | str, key_arn: str, account: str, partition: str, roles: list[str]
) -> list[str]:
    """What stops the functions' roles (their ARNs; empty before the first deploy) from decrypting with the key."""
    key_statements = statements(policy)
    root = account_root(account, partition)
    request = Request(NEEDED, key_arn, {})
    delegated = evaluate(statements_for(key_statements, root), request)[0] == Decision.ALLOW
    problems = []
    for role in roles:
        decision = evaluate(statements_for(key_statements, role), request)[0]
        if decision == Decision.EXPLICIT_DENY:
            problems.append(f"the key policy of {key_arn} denies {role} {NEEDED}: the model key cannot be read")
        elif decision != Decision.ALLOW and not delegated:
            problems.append(
                f"the key policy of {key_arn} neither enables IAM policies (allow {root}) nor allows {role} "
                f"{NEEDED}: every job would fail reading the model key"
            )
    if not roles and not delegated:
        problems.append(
            f"the key policy of {key_arn} does not enable IAM policies (allow {root} kms:*): the functions' roles "
            f"(created by the first deploy) would need {NEEDED} in it by name; enable IAM policies instead"
        )
    return problems
