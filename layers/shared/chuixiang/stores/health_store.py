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
from ..resilience.health import ModelHealth, Observation, counters, health_of

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.service_resource import Table

KEEP_S = 2 * 24 * 3600


class DynamoHealthStore:
    def __init__(
        self, table: Table, endpoint: str, model: str, *, max_age_s: float, clock: Callable[[], float] = time.time
    ) -> None:
        self.table = table
        self.prefix = f"HEALTH#{endpoint.rstrip('/')}#{model}#"
        self.model = model
        self.max_age_s = max_age_s
        self.clock = clock

    def _key(self, at: float) -> dict[str, str]:
        return {"pk": self.prefix + time.strftime("%Y%m%d%H", time.gmtime(at))}

    def observe(self, observation: Observation) -> None:
        now = self.clock()
        adds = counters(observation)
        if not adds:
            return
        try:
            self.table.update_item(
                Key=self._key(now),
                UpdateExpression="ADD "
                + ", ".join(f"{name} :one" for name in adds)
                + " SET updatedAt = :now, expiresAt = :expires"
                + (", rateLimitedAt = :now" if observation.rate_limited else ""),
                ExpressionAttributeValues={":one": 1, ":now": int(now), ":expires": int(now + KEEP_S)},
            )
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
        updated = max((float(str(i.get("updatedAt", 0))) for i in items), default=None)
        return health_of(items, None if updated is None else now - updated, self.max_age_s, now)
