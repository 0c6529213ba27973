"""One synthetic run at a time: a lease item the run takes before it cooks and gives back when it ends.

Why: a run lasts up to a job's whole wait and a confirming job (minutes), longer than the schedule's 5-minute
tick. Two runs at once would count one incident twice and double the model spend. A reserved concurrency of 1
would do it without a table, but a reservation fails the create in accounts with a small concurrency quota; the
lease costs two writes a run. A run killed before it gives the lease back holds it only until its
``expiresAt`` (the invocation's end), which is also the table's TTL attribute.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .conditional import applied

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.service_resource import Table

#: The lease's key; the synthetic function may write only this item (``dynamodb:LeadingKeys``).
LEASE_KEY = {"pk": "SYNTHETIC#run"}


class SyntheticLease:
    def __init__(self, table: Table) -> None:
        self.table = table

    def take(self, run_id: str, now: float, until: float) -> bool:
        """True when no other run holds the lease (or its holder's time has passed)."""
        return applied(
            self.table.put_item,
            Item={**LEASE_KEY, "runId": run_id, "expiresAt": int(until) + 1},
            ConditionExpression="attribute_not_exists(pk) OR expiresAt < :now",
            ExpressionAttributeValues={":now": int(now)},
        )

    def give_back(self, run_id: str) -> None:
        """Only this run's own lease: a late run never frees the next one's."""
        applied(
            self.table.delete_item,
            Key=LEASE_KEY,
            ConditionExpression="runId = :me",
            ExpressionAttributeValues={":me": run_id},
        )
