"""When a user first asked for their job: a POST refused 429 and retried with the same ``Idempotency-Key`` is one
request waiting, not two. The refused one leaves the moment it was first made (``ASKED#<caller>#<key>``); the
admitted one takes it onto the job item as ``askedAt``, and ``JobLatencyMs`` counts from there: the wait a user
spent queued is part of what they waited (it was left out, so a burst of 429s looked like fast jobs).

One write per refusal and one conditional delete per admitted POST with a key (the delete returns what it
removed: no read of its own). The record expires with the longest a client keeps retrying.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..clock import iso, now_utc

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.service_resource import Table

#: How long a refused request's first moment is kept: past any client's give-up (``ClientGiveUpSeconds``, 360 s).
KEEP_S = 3600


def asked_key(caller: str, idempotency_key: str) -> dict[str, str]:
    return {"pk": f"ASKED#{caller}#{idempotency_key}"}


class FirstAsked:
    def __init__(self, table: Table) -> None:
        self.table = table

    def refused(self, caller: str, idempotency_key: str) -> None:
        """A refused POST: keep when this request was first made (a later refusal keeps the first)."""
        now = now_utc()
        self.table.update_item(
            Key=asked_key(caller, idempotency_key),
            UpdateExpression="SET askedAt = if_not_exists(askedAt, :now), expiresAt = :expires",
            ExpressionAttributeValues={":now": iso(now), ":expires": int(now.timestamp()) + KEEP_S},
        )

    def admitted(self, caller: str, idempotency_key: str) -> str | None:
        """The admitted POST: when its request was first made, if it was refused before (the record is gone)."""
        gone = self.table.delete_item(Key=asked_key(caller, idempotency_key), ReturnValues="ALL_OLD")
        asked = gone.get("Attributes", {}).get("askedAt")
        return str(asked) if asked else None
