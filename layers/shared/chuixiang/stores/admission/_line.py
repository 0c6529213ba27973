"""The admission line: where a refused caller keeps its place while it comes back when told (see
:mod:`._slots`). Places live in :data:`~._state.LINE_BUCKETS` items, a map of caller digest to
place each, so no one item takes every write."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from ... import clock
from ..conditional import applied
from ._state import LINE_BUCKET_MAX, WAIT_GRACE_S, Seen, line_bucket, line_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.service_resource import Table


class Line:
    """The line's items in the jobs table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def wait(self, seen: Seen, me: str, retry_after: float) -> None:
        """Take (or keep) a place in line, until a client that obeys ``retry_after`` is back."""
        bucket = line_bucket(me)
        places, mine = seen.line.get(bucket, {}), seen.place_of(me)
        if mine is None and len(seen.kept(bucket)) >= LINE_BUCKET_MAX:
            return
        since_ms = mine.since_ms if mine else int(clock.now_utc().timestamp() * 1000)
        place = {"s": since_ms, "u": seen.now + int(retry_after) + WAIT_GRACE_S}
        gone = [c for c, p in places.items() if p.until < seen.now and c != me][:50]  # lapsed places, swept
        names = {"#w": "w", "#me": me, **{f"#x{i}": c for i, c in enumerate(gone)}}
        remove = (" REMOVE " + ", ".join(f"#w.#x{i}" for i in range(len(gone)))) if gone else ""
        expires = int((clock.now_utc() + timedelta(days=1)).timestamp())
        for _ in range(2):  # the bucket item may not exist yet: create it, or add to the one created meanwhile
            if applied(
                self.table.update_item,
                Key=line_key(bucket),
                UpdateExpression="SET #w.#me = :place, expiresAt = :exp" + remove,
                ConditionExpression="attribute_exists(#w)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={":place": place, ":exp": expires},
            ):
                return
            if applied(
                self.table.put_item,
                Item={**line_key(bucket), "w": {me: place}, "expiresAt": expires},
                ConditionExpression="attribute_not_exists(pk)",
            ):
                return

    def leave(self, me: str) -> None:
        """Give up ``me``'s place (it was admitted)."""
        applied(
            self.table.update_item,
            Key=line_key(line_bucket(me)),
            UpdateExpression="REMOVE #w.#me",
            ConditionExpression="attribute_exists(#w)",
            ExpressionAttributeNames={"#w": "w", "#me": me},
        )
