"""Whether a secret's customer-managed KMS key lets the functions that read the secret decrypt it.

With ``ModelApiKeyKmsKeyArn`` (the recipe, image and canary functions) or ``SyntheticTokenKmsKeyArn`` (the
synthetic job) set, the roles' ``kms:Decrypt`` statement is only half of it: "Unless the key policy explicitly
allows it, you cannot use IAM policies to allow access to a KMS key" (AWS KMS developer guide, *Key policies*).
The preflight (``chuixiang ladder --account``) asks KMS's question as the local cloud asks it
(:func:`~chuixiang_local.cloud.iam.key_policy.decrypt_refusal`, with the context Secrets Manager's decrypt
carries and the statement the template gives the roles), and refuses a deploy whose jobs would all fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chuixiang_local.cloud.iam.key_policy import (
    NEEDED,
    account_root,
    decrypt_refusal,
    kms_context,
    secret_reader_statement,
)
from chuixiang_local.cloud.iam.policy import Request

#: The session name a role's decrypt is judged with before the stack exists (no key policy names a session).
_SESSION = "preflight"


def key_policy_problems(
    policy: Mapping[str, Any] | str, key_arn: str, account: str, partition: str, roles: list[str]
) -> list[str]:
    """What stops the roles (their ARNs; empty before the first deploy) from decrypting with the key."""
    region = key_arn.split(":")[3]

    def refusal(role: str) -> str | None:
        context = kms_context(region=region, partition=partition, account=account, role_arn=role, session=_SESSION)
        return decrypt_refusal(
            policy,
            Request(NEEDED, key_arn, context),
            role_arn=role,
            account=account,
            partition=partition,
            identity=[secret_reader_statement(key_arn, region, partition)],
        )

    if not roles:  # before the first deploy the roles have no ARN: only a key that defers to IAM lets them in
        reason = refusal(f"arn:{partition}:iam::{account}:role/not-yet-created")
        root = account_root(account, partition)
        return (
            [
                f"the key policy of {key_arn} does not enable IAM policies (allow {root} kms:*; {reason}): the "
                f"functions' roles (created by the first deploy) would need {NEEDED} in it by name; enable IAM policies"
            ]
            if reason
            else []
        )
    return [
        f"KMS would refuse {role} {NEEDED} on {key_arn}: {reason}; every read of the secret would fail"
        for role in roles
        if (reason := refusal(role)) is not None
    ]
