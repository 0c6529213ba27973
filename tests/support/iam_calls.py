"""A call as the local IAM judge authorises it, in the tests' account (the jobs table's partition key ``pk``)."""

from __future__ import annotations

from chuixiang_local.cloud.iam.calls import AwsCall
from chuixiang_local.cloud.iam.facts import Authorisation, authorisation_of

ACCOUNT = "123456789012"


def authorisations(call: AwsCall) -> list[Authorisation]:
    """What IAM checks for ``call``: one authorisation per resource (or per item of a transaction)."""
    return authorisation_of(
        call,
        principal_arn="arn:aws:sts::1:assumed-role/r/s",
        account=ACCOUNT,
        partition="aws",
        leading_key=lambda table: "pk" if table == "jobs" else None,
    )
