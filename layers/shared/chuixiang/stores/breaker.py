"""A circuit breaker per (endpoint, model), its state shared by every invocation in the jobs table.

Why not Powertools' Circuit Breaker: it counts failures per execution environment,
in memory, and persists only the transitions. With every Lambda container (and
every local invocation, each its own process) starting its count from zero, a
model failing every call for twenty jobs spread over many containers never
reaches the threshold. Here the *count* is shared: each health failure is an
atomic ``ADD`` on the breaker item, the transition to OPEN a conditional write
that exactly one caller wins, and the half-open probe a conditional claim that
exactly one invocation wins. The healthy path of a closed breaker costs one read
and no write.

An item: ``pk = BREAKER#<endpoint>#<model>``, ``state`` (closed | open | half_open),
``failures`` (consecutive), ``openedAt`` (epoch seconds), ``probeOwner`` and
``probeUntil`` (the probe's lease). If DynamoDB itself fails, the breaker lets
the call through (fail-open) and says so in the log: it must never be the reason
a job fails.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from ..observability import logger, model_metric
from .conditional import applied, condition_failed


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class Admission(StrEnum):
    CALL = "call"  #: closed: call as usual
    PROBE = "probe"  #: this invocation won the half-open probe
    REJECT = "reject"  #: open: do not call


@dataclass(frozen=True)
class BreakerConfig:
    failure_threshold: int
    recovery_s: float


def breaker_key(endpoint: str, model: str) -> dict[str, str]:
    return {"pk": f"BREAKER#{endpoint.rstrip('/')}#{model}"}


class CircuitBreaker:
    """One model's breaker. ``admit()`` before a call; ``record(admission, healthy=…)`` after it."""

    def __init__(self, table: Any, endpoint: str, model: str, config: BreakerConfig,
                 clock: Callable[[], float] = time.time) -> None:
        """``clock``: epoch seconds, shared by every invocation (so wall time, not a monotonic clock)."""
        self.table = table
        self.model = model
        self.key = breaker_key(endpoint, model)
        self.config = config
        self.clock = clock
        self.owner = uuid.uuid4().hex  #: this invocation, for the probe lease
        self._failures_seen = 0

    # --- before the call -------------------------------------------------------------------

    def admit(self, lease_s: float) -> Admission:
        """May this invocation call the model now? ``lease_s``: how long a probe may take at most."""
        try:
            item = self.table.get_item(Key=self.key, ConsistentRead=True).get("Item") or {}
        except (ClientError, BotoCoreError):
            logger.warning("breaker state unreadable; calling anyway", extra={"model": self.model})
            return Admission.CALL
        state = BreakerState(item.get("state", BreakerState.CLOSED))
        self._failures_seen = int(item.get("failures", 0))
        now = self.clock()
        if state is BreakerState.CLOSED:
            return Admission.CALL
        if state is BreakerState.OPEN:
            opened_at = float(item.get("openedAt", 0))
            if now >= opened_at + self.config.recovery_s and self._claim_probe(
                    "#state = :open AND openedAt = :opened", {":open": BreakerState.OPEN.value,
                                                              ":opened": item.get("openedAt", 0)}, lease_s):
                self._transition(BreakerState.OPEN, BreakerState.HALF_OPEN)
                return Admission.PROBE
            return self._reject(state)
        # HALF_OPEN: someone probes; take over only if that probe's lease ran out (its invocation died).
        lease_until = float(item.get("probeUntil", 0))
        if now >= lease_until and self._claim_probe(
                "#state = :half AND probeUntil = :lease_was", {":lease_was": item.get("probeUntil", 0)}, lease_s):
            return Admission.PROBE
        return self._reject(state)

    def _claim_probe(self, condition: str, values: dict[str, Any], lease_s: float) -> bool:
        try:
            self.table.update_item(
                Key=self.key,
                UpdateExpression="SET #state = :half, probeOwner = :me, probeUntil = :until",
                ConditionExpression=condition,
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={**values, ":half": BreakerState.HALF_OPEN.value, ":me": self.owner,
                                           ":until": _num(self.clock() + lease_s)},
            )
            return True
        except (ClientError, BotoCoreError) as exc:
            if not (isinstance(exc, ClientError) and condition_failed(exc)):
                logger.warning("breaker probe claim failed", extra={"model": self.model, "error": str(exc)})
            return False

    def _reject(self, state: BreakerState) -> Admission:
        logger.info("breaker rejected a call", extra={"model": self.model, "breaker_state": state.value})
        model_metric("BreakerRejected", MetricUnit.Count, 1, self.model)
        return Admission.REJECT

    # --- after the call --------------------------------------------------------------------

    def record(self, admission: Admission, *, healthy: bool) -> None:
        """The call's outcome for the model's health (an invalid answer is healthy: the model answered)."""
        try:
            if admission is Admission.PROBE:
                self._end_probe(healthy)
            elif healthy:
                if self._failures_seen:
                    self._update("SET failures = :zero", "#state = :closed",
                                 {":zero": 0, ":closed": BreakerState.CLOSED.value})
            else:
                self._count_failure()
        except (ClientError, BotoCoreError) as exc:
            logger.warning("breaker state not recorded", extra={"model": self.model, "error": str(exc)})

    def _count_failure(self) -> None:
        result = self.table.update_item(
            Key=self.key,
            UpdateExpression="ADD failures :one SET #state = if_not_exists(#state, :closed)",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={":one": 1, ":closed": BreakerState.CLOSED.value},
            ReturnValues="ALL_NEW",
        )
        item = result.get("Attributes", {})
        failures = int(item.get("failures", 0))
        if item.get("state") == BreakerState.CLOSED.value and failures >= self.config.failure_threshold:
            opened = self._update(
                "SET #state = :open, openedAt = :now", "#state = :closed AND failures >= :threshold",
                {":open": BreakerState.OPEN.value, ":now": _num(self.clock()), ":closed": BreakerState.CLOSED.value,
                 ":threshold": self.config.failure_threshold})
            if opened:
                self._transition(BreakerState.CLOSED, BreakerState.OPEN, failures=failures)
                model_metric("BreakerOpened", MetricUnit.Count, 1, self.model)

    def _end_probe(self, healthy: bool) -> None:
        if healthy:
            update = "SET #state = :closed, failures = :zero REMOVE probeOwner, probeUntil, openedAt"
            values: dict[str, Any] = {":closed": BreakerState.CLOSED.value, ":zero": 0}
            target = BreakerState.CLOSED
        else:
            update = "SET #state = :open, openedAt = :now REMOVE probeOwner, probeUntil"
            values = {":open": BreakerState.OPEN.value, ":now": _num(self.clock())}
            target = BreakerState.OPEN
        if self._update(update, "probeOwner = :me", {**values, ":me": self.owner}):
            self._transition(BreakerState.HALF_OPEN, target)
            if target is BreakerState.OPEN:
                model_metric("BreakerOpened", MetricUnit.Count, 1, self.model)

    def _update(self, update: str, condition: str, values: dict[str, Any]) -> bool:
        return applied(self.table.update_item, Key=self.key, UpdateExpression=update, ConditionExpression=condition,
                       ExpressionAttributeNames={"#state": "state"}, ExpressionAttributeValues=values)

    def _transition(self, old: BreakerState, new: BreakerState, **extra: Any) -> None:
        logger.info("breaker transition", extra={"model": self.model, "from_state": old.value,
                                                  "to_state": new.value, **extra})

    def state(self) -> dict[str, Any]:
        """The stored item (for tests and operators)."""
        return dict(self.table.get_item(Key=self.key, ConsistentRead=True).get("Item") or {})


def _num(value: float) -> Decimal:
    return Decimal(str(round(value, 3)))
