"""How long jobs take, measured: what ``Retry-After`` on a full admission is computed from.

The image stage, a job's last, adds each finished job's time (its execution's start to its picture) to
this hour's record (``pk = JOBTIME#<yyyymmddhh>``); admission reads this hour's and the last's mean.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING

from .. import clock

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.service_resource import Table

#: How long a generated job holds its slot, typically: ~90 s of recipe at the evening peak and ~30 s of
#: picture (docs/capacity.md); this until :data:`MIN_SAMPLES` jobs were measured.
EXPECTED_JOB_S = 120
#: Jobs measured before their mean stands for the typical job.
MIN_SAMPLES = 3
#: How long a container trusts what it read (the figure changes by the hour, not the second).
CACHE_S = 30.0

#: Each container's last read: table -> (seconds, trusted until: monotonic).
_READ: dict[str, tuple[float, float]] = {}


def job_time_key(at: datetime) -> dict[str, str]:
    """This hour's record of finished jobs' times."""
    return {"pk": f"JOBTIME#{at:%Y%m%d%H}"}


def _number(value: object) -> float:
    return float(Decimal(str(value)))


class JobTimes:
    def __init__(self, table: Table) -> None:
        self.table = table

    def record(self, seconds: float) -> None:
        """Add one finished job's time to this hour's record."""
        now = clock.now_utc()
        self.table.update_item(
            Key=job_time_key(now),
            UpdateExpression="SET expiresAt = :exp ADD totalS :s, jobs :one",
            ExpressionAttributeValues={
                ":s": Decimal(str(round(seconds, 1))),
                ":one": 1,
                ":exp": int((now + timedelta(days=2)).timestamp()),
            },
        )

    def expected_s(self) -> float:
        """The mean time of the jobs measured this hour and the last (:data:`EXPECTED_JOB_S` until there are
        :data:`MIN_SAMPLES`), read at most every :data:`CACHE_S` per container."""
        cached = _READ.get(self.table.name)
        if cached is not None and time.monotonic() < cached[1]:
            return cached[0]
        now = clock.now_utc()
        keys = [job_time_key(now), job_time_key(now - timedelta(hours=1))]
        client, name = self.table.meta.client, self.table.name
        answer = client.batch_get_item(RequestItems={name: {"Keys": keys, "ConsistentRead": False}})
        items = answer["Responses"].get(name, [])
        total = sum(_number(i.get("totalS", 0)) for i in items)
        jobs = sum(int(_number(i.get("jobs", 0))) for i in items)
        expected = total / jobs if jobs >= MIN_SAMPLES else float(EXPECTED_JOB_S)
        _READ[self.table.name] = (expected, time.monotonic() + CACHE_S)
        return expected
