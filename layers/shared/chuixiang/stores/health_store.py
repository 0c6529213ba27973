"""The models' measured health in the jobs table (the DynamoDB :class:`HealthStore`).

One item per (endpoint, model, hour): ``pk = HEALTH#<endpoint>#<model>#<yyyymmddhh>`` with the
histograms' counters (``fc0``…, ``sp0``…), ``valid``, ``answered``, ``updatedAt`` (epoch seconds) and
``expiresAt`` (the table's TTL: two days). A call is one ``UpdateItem`` of ``ADD`` s: atomic, no read,
no scan. A read is two eventually consistent ``GetItem`` s: this hour's item and the previous hour's. Any DynamoDB error
is logged and ignored: health is advice, never the reason a job fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from ..observability import logger
from ..resilience.health import (
    FIRST_CONTENT_EDGES_MS,
    SPEED_EDGES_TPS,
    ModelHealth,
    Observation,
    first_content_bucket,
    histogram,
    speed_bucket,
    summarise,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.service_resource import Table

KEEP_S = 2 * 24 * 3600
_FC_BUCKETS = len(FIRST_CONTENT_EDGES_MS) + 1
_SP_BUCKETS = len(SPEED_EDGES_TPS)


class DynamoHealthStore:
    def __init__(self, table: Table, endpoint: str, model: str, *, max_age_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.table = table
        self.prefix = f"HEALTH#{endpoint.rstrip('/')}#{model}#"
        self.model = model
        self.max_age_s = max_age_s
        self.clock = clock

    def _key(self, at: float) -> dict[str, str]:
        return {"pk": self.prefix + time.strftime("%Y%m%d%H", time.gmtime(at))}

    def observe(self, observation: Observation) -> None:
        now = self.clock()
        adds = []
        if observation.first_content_ms is not None:
            adds.append(f"fc{first_content_bucket(observation.first_content_ms)}")
        if observation.tokens_per_s is not None:
            adds.append(f"sp{speed_bucket(observation.tokens_per_s)}")
        if observation.valid is not None:
            adds.append("answered")
            if observation.valid:
                adds.append("valid")
        if not adds:
            return
        try:
            self.table.update_item(
                Key=self._key(now),
                UpdateExpression="ADD " + ", ".join(f"{name} :one" for name in adds)
                                 + " SET updatedAt = :now, expiresAt = :expires",
                ExpressionAttributeValues={":one": 1, ":now": int(now), ":expires": int(now + KEEP_S)})
        except (ClientError, BotoCoreError) as exc:
            logger.warning("model health not recorded", extra={"model": self.model, "error": str(exc)})

    def read(self) -> ModelHealth:
        now = self.clock()
        keys = [self._key(now), self._key(now - 3600)]
        try:
            items = [item for key in keys if (item := self.table.get_item(Key=key).get("Item"))]
        except (ClientError, BotoCoreError) as exc:
            logger.warning("model health unreadable", extra={"model": self.model, "error": str(exc)})
            return ModelHealth()
        fc = [sum(col) for col in zip(*(histogram(i, "fc", _FC_BUCKETS) for i in items), strict=True)] \
            if items else [0] * _FC_BUCKETS
        sp = [sum(col) for col in zip(*(histogram(i, "sp", _SP_BUCKETS) for i in items), strict=True)] \
            if items else [0] * _SP_BUCKETS
        updated = max((float(str(i.get("updatedAt", 0))) for i in items), default=None)
        return summarise(fc, sp, sum(int(str(i.get("valid", 0))) for i in items),
                         sum(int(str(i.get("answered", 0))) for i in items),
                         None if updated is None else now - updated, self.max_age_s)
