"""The slots: take one for a job (or say why not, and when to come back), give it back when the job ends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from ... import clock
from ...observability import dimensioned_metric
from ..conditional import applied
from ..job_times import JobTimes

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.service_resource import Table

from ._line import Line
from ._state import (
    FREE,
    LINE_BUCKETS,
    RETRY_AFTER_MAX_S,
    ROUNDS,
    TICKET_KEY,
    TRIES,
    Held,
    Lane,
    Place,
    Refused,
    Seen,
    caller_digest,
    lane_key,
    line_key,
    slot_key,
)

__all__ = ["Admission"]


class Admission:
    """At most ``limit`` jobs in flight, at most ``per_caller`` of them one caller's (0: no such cap)."""

    def __init__(self, table: Table, limit: int, per_caller: int = 0) -> None:
        self.table, self.limit, self.per_caller = table, limit, per_caller
        self.line = Line(table)

    def admit(self, job_id: str, caller: str, until: int) -> int | Refused:
        """A slot for ``job_id`` until ``until`` (its deadline at the latest), or why not and when to come back.
        ``caller``: who asks (a JWT's subject, a client, or a source address); ``""`` is one anonymous caller."""
        me = caller_digest(caller)
        seen = self._read(me)
        # Saturation, as the on-call reads it: the slots in use as each request found them (its maximum).
        dimensioned_metric("AdmissionSlotsInUse", MetricUnit.Count, len(seen.held))
        lane = self._take_lane(seen, me, job_id, until) if self.per_caller else None
        if self.per_caller and lane is None:
            return Refused(self._retry_after(seen, need=1, among=seen.of(me)), "caller_limit")
        slot = self._take_free_slot(seen, me, job_id, until)
        if slot is None:
            if lane is not None:
                self._lane_update(me, lane, job_id, delete=True)
            retry_after = self._retry_after(seen, need=seen.ahead_of(me) + 1 - len(seen.free(self.limit)))
            self.line.wait(seen, me, retry_after)
            return Refused(retry_after, "full")
        if lane is not None and not self._lane_update(me, lane, job_id, slot=slot):
            self.release(job_id, slot)
            return Refused(self._retry_after(seen, need=1, among=seen.of(me)), "caller_limit")
        if seen.place_of(me) is not None:
            self.line.leave(me)
        return slot

    def release(self, job_id: str, slot: int | None) -> None:
        """Free ``job_id``'s slot (a no-op when it no longer holds it); its caller's lane frees with it."""
        if slot is not None:
            applied(
                self.table.delete_item,
                Key=slot_key(int(slot)),
                ConditionExpression="jobId = :job",
                ExpressionAttributeValues={":job": job_id},
            )

    # --- taking a slot, and a lane of the caller's share ---------------------------------------------------

    def _take_free_slot(self, seen: Seen, me: str, job_id: str, until: int) -> int | None:
        """A free slot not owed to a caller ahead in line."""
        ticket = self._ticket()
        item = {"jobId": job_id, "caller": me, "expiresAt": until, "takenAt": seen.now}
        for round_ in range(ROUNDS):
            if round_:
                seen = self._read(me)
            free = seen.free(self.limit)
            if len(free) <= seen.ahead_of(me):
                return None
            # Requests arriving together start at different free slots (the ticket).
            for slot in sorted(free, key=lambda n: (n - ticket) % self.limit)[:TRIES]:
                if applied(
                    self.table.put_item,
                    Item={**item, **slot_key(slot)},
                    ConditionExpression=FREE,
                    ExpressionAttributeValues={":now": seen.now},
                ):
                    return slot
        return None

    def _ticket(self) -> int:
        """A number from an atomic counter: requests arriving together start at different free slots."""
        answer = self.table.update_item(
            Key=TICKET_KEY,
            UpdateExpression="ADD #n :one",
            ExpressionAttributeNames={"#n": "n"},
            ExpressionAttributeValues={":one": 1},
            ReturnValues="UPDATED_NEW",
        )
        return int(str(answer["Attributes"]["n"]))

    def _take_lane(self, seen: Seen, me: str, job_id: str, until: int) -> int | None:
        """One of the caller's ``per_caller`` lanes (``pk = ADMISSION#lane#<caller>#<k>``), taken by compare-and-
        swap on the job that last held it: exact however many of its requests arrive at once. A lane is held
        while the slot it names holds its job, so whatever frees the slot (the workflow, a poll, the lease)
        frees the lane; a lane whose request died before naming a slot lapses after :data:`LANE_PENDING_S`."""
        for k in range(self.per_caller):
            lane = seen.lanes.get(k)
            if lane is not None and (seen.holds(lane) or self._still_held(lane)):
                continue
            if applied(
                self.table.put_item,
                Item={**lane_key(me, k), "jobId": job_id, "slot": -1, "takenAt": seen.now, "expiresAt": until},
                ConditionExpression="attribute_not_exists(pk)" if lane is None else "jobId = :was",
                **({} if lane is None else {"ExpressionAttributeValues": {":was": lane.job_id}}),
            ):
                return k
        return None

    def _still_held(self, lane: Lane) -> bool:
        """Whether the slot a bound lane names holds its job, read now. A batch read is no snapshot: it may
        read the slot before its job took it and the lane after the job named it, and a lane must not be taken
        from a job that holds its slot."""
        if lane.slot < 0:
            return False
        item = self.table.get_item(Key=slot_key(lane.slot), ConsistentRead=True).get("Item") or {}
        return item.get("jobId") == lane.job_id and int(str(item.get("expiresAt", 0))) >= int(
            clock.now_utc().timestamp()
        )

    def _lane_update(self, me: str, k: int, job_id: str, *, slot: int = -1, delete: bool = False) -> bool:
        """Name the slot the lane's job holds, or give the lane back (its job got no slot). False: the lane is
        no longer the job's (it stayed unnamed past :data:`LANE_PENDING_S` and another request took it)."""
        condition = {"ConditionExpression": "jobId = :job", "ExpressionAttributeValues": {":job": job_id}}
        if delete:
            return applied(self.table.delete_item, Key=lane_key(me, k), **condition)
        return applied(
            self.table.update_item,
            Key=lane_key(me, k),
            UpdateExpression="SET #slot = :slot",
            ExpressionAttributeNames={"#slot": "slot"},
            **{**condition, "ExpressionAttributeValues": {":job": job_id, ":slot": slot}},
        )

    def _retry_after(self, seen: Seen, need: int, among: list[Held] | None = None) -> float:
        """When the ``need``-th of the held slots (of ``among``, else all) is expected to free: a typical job's
        length after it was taken (its lease end at the latest). Deeper than one round: the next round's."""
        if need <= 0:
            return 1.0  # free slots were there, taken under us: try again at once
        expected = JobTimes(self.table).expected_s()
        frees = sorted(min(h.ends, h.taken + expected) if h.taken else h.ends for h in (among or seen.held.values()))
        if not frees:
            return 1.0
        rounds, index = divmod(need - 1, len(frees))
        at = frees[index] + rounds * expected
        return float(max(1, min(round(at - seen.now), RETRY_AFTER_MAX_S)))

    # --- reading -----------------------------------------------------------------------------------------

    def _read(self, me: str) -> Seen:
        """The held slots, the line and ``me``'s lanes, in consistent batch reads (at most 100 keys each)."""
        now = int(clock.now_utc().timestamp())
        keys = [slot_key(n) for n in range(self.limit)]
        keys += [line_key(b) for b in range(LINE_BUCKETS)]
        keys += [lane_key(me, k) for k in range(self.per_caller)]
        seen = Seen({}, {}, {}, now)
        for item in self._batch_get(keys):
            kind, _, rest = str(item["pk"]).removeprefix("ADMISSION#").partition("#")
            if kind == "line":
                seen.line[int(rest)] = {c: Place(c, int(p["s"]), int(p["u"])) for c, p in (item.get("w") or {}).items()}
            elif kind == "lane":
                seen.lanes[int(rest.rsplit("#", 1)[1])] = Lane(
                    str(item["jobId"]), int(item["slot"]), int(item["takenAt"])
                )
            elif int(item.get("expiresAt", 0)) >= now:
                seen.held[int(kind)] = Held(
                    int(kind),
                    str(item["jobId"]),
                    str(item.get("caller", "")),
                    int(item["expiresAt"]),
                    int(item.get("takenAt", 0)),
                )
        return seen

    def _batch_get(self, keys: list[dict[str, str]]) -> list[dict[str, Any]]:
        client, name = self.table.meta.client, self.table.name  # the resource's client takes plain values
        items: list[dict[str, Any]] = []
        for i in range(0, len(keys), 100):
            request: dict[str, Any] = {name: {"Keys": keys[i : i + 100], "ConsistentRead": True}}
            while request:
                answer = client.batch_get_item(RequestItems=request)
                items.extend(answer["Responses"].get(name, []))
                request = answer.get("UnprocessedKeys") or {}
        return items
