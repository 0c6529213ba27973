"""The circuit breaker's shared state in the jobs table (the DynamoDB :class:`BreakerStore`).

An item: ``pk = BREAKER#<endpoint>#<model>``, ``state`` (closed | open | half_open),
``failures`` (consecutive), ``openedAt`` (epoch seconds), ``probeOwner`` and
``probeUntil`` (the probe's lease). Every failure is an atomic ``ADD``; every
transition a conditional update that exactly one caller wins.

A closed breaker with no failures is the state of almost every read, so it can be
served from this container's memory for ``closed_ttl_s`` (as Powertools'
idempotency persistence layers keep a local cache): another container's opening
is then seen up to that late. Any other state is read consistently every time,
and every write of this container drops its cached record. The cache is off by
default: ``bench/breaker_read.py`` measured both, and a container admits each model
once per job, jobs tens of seconds apart, so a cache of a second or two is never
hit in production (see ``bench/README.md``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from ..resilience.breaker import BreakerRecord, BreakerState, BreakerStoreError
from .conditional import applied

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.service_resource import Table

#: How long a closed, failure-free record may be served from memory (0: read every time, the default).
CLOSED_TTL_S = 0.0

_cache: dict[str, tuple[BreakerRecord, float]] = {}
_cache_lock = threading.Lock()


def breaker_key(endpoint: str, model: str) -> dict[str, str]:
    return {"pk": f"BREAKER#{endpoint.rstrip('/')}#{model}"}


class DynamoBreakerStore:
    """One model's breaker item. Every DynamoDB error comes out as :class:`BreakerStoreError`."""

    def __init__(
        self,
        table: Table,
        endpoint: str,
        model: str,
        *,
        closed_ttl_s: float = CLOSED_TTL_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.table = table
        self.key = breaker_key(endpoint, model)
        self.closed_ttl_s = closed_ttl_s
        self.monotonic = monotonic

    def read(self) -> BreakerRecord:
        pk = self.key["pk"]
        if self.closed_ttl_s > 0:
            with _cache_lock:
                cached = _cache.get(pk)
            if cached is not None and self.monotonic() < cached[1]:
                return cached[0]
        item = self._guard(lambda: self.table.get_item(Key=self.key, ConsistentRead=True).get("Item") or {})
        record = BreakerRecord(
            state=BreakerState(str(item.get("state", BreakerState.CLOSED))),
            failures=int(item.get("failures", 0)),
            opened_at=float(item.get("openedAt", 0)),
            probe_until=float(item.get("probeUntil", 0)),
        )
        if self.closed_ttl_s > 0 and record == BreakerRecord():
            with _cache_lock:
                _cache[pk] = (record, self.monotonic() + self.closed_ttl_s)
        return record

    def claim_probe(self, seen: BreakerRecord, owner: str, until: float) -> bool:
        if seen.state is BreakerState.OPEN:
            condition, values = (
                "#state = :open AND openedAt = :seen",
                {":open": BreakerState.OPEN.value, ":seen": _num(seen.opened_at)},
            )
        else:
            condition, values = "#state = :half AND probeUntil = :seen", {":seen": _num(seen.probe_until)}
        return self._update(
            "SET #state = :half, probeOwner = :me, probeUntil = :until",
            condition,
            {**values, ":half": BreakerState.HALF_OPEN.value, ":me": owner, ":until": _num(until)},
        )

    def add_failure(self) -> BreakerRecord:
        self._forget()
        result = self._guard(
            lambda: self.table.update_item(
                Key=self.key,
                UpdateExpression="ADD failures :one SET #state = if_not_exists(#state, :closed)",
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={":one": 1, ":closed": BreakerState.CLOSED.value},
                ReturnValues="ALL_NEW",
            )
        )
        item = result.get("Attributes", {})
        return BreakerRecord(
            state=BreakerState(str(item.get("state", BreakerState.CLOSED))), failures=int(item.get("failures", 0))
        )

    def open(self, now: float, threshold: int) -> bool:
        return self._update(
            "SET #state = :open, openedAt = :now",
            "#state = :closed AND failures >= :threshold",
            {
                ":open": BreakerState.OPEN.value,
                ":now": _num(now),
                ":closed": BreakerState.CLOSED.value,
                ":threshold": threshold,
            },
        )

    def reset_failures(self) -> None:
        self._update("SET failures = :zero", "#state = :closed", {":zero": 0, ":closed": BreakerState.CLOSED.value})

    def end_probe(self, owner: str, healthy: bool, now: float) -> bool:
        if healthy:
            update = "SET #state = :closed, failures = :zero REMOVE probeOwner, probeUntil, openedAt"
            values: dict[str, Any] = {":closed": BreakerState.CLOSED.value, ":zero": 0}
        else:
            update = "SET #state = :open, openedAt = :now REMOVE probeOwner, probeUntil"
            values = {":open": BreakerState.OPEN.value, ":now": _num(now)}
        return self._update(update, "probeOwner = :me", {**values, ":me": owner})

    def item(self) -> dict[str, Any]:
        """The stored item as it is now (for tests and operators)."""
        return dict(self.table.get_item(Key=self.key, ConsistentRead=True).get("Item") or {})

    def _update(self, update: str, condition: str, values: dict[str, Any]) -> bool:
        self._forget()
        return bool(
            self._guard(
                lambda: applied(
                    self.table.update_item,
                    Key=self.key,
                    UpdateExpression=update,
                    ConditionExpression=condition,
                    ExpressionAttributeNames={"#state": "state"},
                    ExpressionAttributeValues=values,
                )
            )
        )

    def _forget(self) -> None:
        with _cache_lock:
            _cache.pop(self.key["pk"], None)

    @staticmethod
    def _guard(call: Callable[[], Any]) -> Any:
        try:
            return call()
        except (ClientError, BotoCoreError) as exc:
            raise BreakerStoreError(str(exc)) from exc


def _num(value: float) -> Decimal:
    return Decimal(str(round(value, 3)))
