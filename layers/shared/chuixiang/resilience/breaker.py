"""A circuit breaker per (endpoint, model) whose state every invocation shares: the policy.

Why not Powertools' Circuit Breaker: it counts failures per execution environment,
in memory, and persists only the transitions. With every Lambda container (and
every local invocation, each its own process) starting its count from zero, a
model failing every call for twenty jobs spread over many containers never
reaches the threshold. Here the *count* is shared: each health failure is an
atomic increment in the :class:`BreakerStore`, the transition to OPEN a
conditional write that exactly one caller wins, and the half-open probe a
conditional claim that exactly one invocation wins.

This module is the policy only; where the state lives is the store's business
(``chuixiang.stores.breaker_store`` keeps it in the jobs table). If the store
fails, the breaker lets the call through (fail-open) and says so in the log: it
must never be the reason a job fails.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from aws_lambda_powertools.metrics import MetricUnit

from ..observability import logger, model_metric


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class Permit(StrEnum):
    CALL = "call"  #: closed: call as usual
    PROBE = "probe"  #: this invocation won the half-open probe
    REJECT = "reject"  #: open: do not call


#: ``BreakerState``, the breaker as each call found it: 0 closed, 0.5 a probe let through, 1 open (refused).
STATE_VALUE: dict[Permit, float] = {Permit.CALL: 0.0, Permit.PROBE: 0.5, Permit.REJECT: 1.0}


@dataclass(frozen=True)
class BreakerConfig:
    failure_threshold: int
    recovery_s: float


@dataclass(frozen=True)
class BreakerRecord:
    """One model's shared breaker state, as last read."""

    state: BreakerState = BreakerState.CLOSED
    failures: int = 0  #: consecutive health failures
    opened_at: float = 0.0  #: epoch seconds
    probe_until: float = 0.0  #: epoch seconds: the half-open probe's lease


class BreakerStoreError(Exception):
    """The store could not be read or written (the breaker then fails open)."""


class BreakerStore(Protocol):
    """Where one model's breaker state lives. Each write is atomic; the conditional ones say whether they won."""

    def read(self) -> BreakerRecord: ...

    def claim_probe(self, seen: BreakerRecord, owner: str, until: float) -> bool:
        """Become the probe if the state is still ``seen`` (OPEN at the same ``opened_at``, or HALF_OPEN
        with the same lapsed lease): False when another invocation changed it first."""
        ...

    def add_failure(self) -> BreakerRecord:
        """Count one more consecutive failure; the record after the increment."""
        ...

    def open(self, now: float, threshold: int) -> bool:
        """CLOSED with at least ``threshold`` failures → OPEN at ``now``; False when someone else did it."""
        ...

    def reset_failures(self) -> None:
        """A healthy call of a CLOSED breaker: the consecutive count starts again."""
        ...

    def end_probe(self, owner: str, healthy: bool, now: float) -> bool:
        """The probe ``owner`` ends: CLOSED (healthy) or OPEN again at ``now``; False if it lost its lease."""
        ...


class CircuitBreaker:
    """One model's breaker. ``permit()`` before a call; ``record(permit, healthy=…)`` after it."""

    def __init__(
        self, store: BreakerStore, model: str, config: BreakerConfig, clock: Callable[[], float] = time.time
    ) -> None:
        """``clock``: epoch seconds, shared by every invocation (so wall time, not a monotonic clock)."""
        self.store = store
        self.model = model
        self.config = config
        self.clock = clock
        self.owner = uuid.uuid4().hex  #: this invocation, for the probe lease
        self._failures_seen = 0

    def permit(self, lease_s: float) -> Permit:
        """May this invocation call the model now? ``lease_s``: how long a probe may take at most."""
        try:
            seen = self.store.read()
        except BreakerStoreError:
            logger.warning("breaker state unreadable; calling anyway", extra={"model": self.model})
            return Permit.CALL
        self._failures_seen = seen.failures
        now = self.clock()
        if seen.state is BreakerState.CLOSED:
            return self._answer(Permit.CALL)
        # OPEN past its recovery time, or HALF_OPEN whose probe's lease ran out (its invocation died).
        due = seen.opened_at + self.config.recovery_s if seen.state is BreakerState.OPEN else seen.probe_until
        if now >= due and self._claim_probe(seen, now + lease_s):
            if seen.state is BreakerState.OPEN:
                self._transition(BreakerState.OPEN, BreakerState.HALF_OPEN)
            return self._answer(Permit.PROBE)
        logger.info("breaker rejected a call", extra={"model": self.model, "breaker_state": seen.state.value})
        model_metric("BreakerRejected", MetricUnit.Count, 1, self.model)
        return self._answer(Permit.REJECT)

    def _answer(self, permit: Permit) -> Permit:
        """``permit``, its state recorded as a gauge: its maximum over a period says whether the model's breaker
        refused calls then (the on-call's "is its breaker open now?"), its transitions alone could not."""
        model_metric("BreakerState", MetricUnit.NoUnit, STATE_VALUE[permit], self.model)
        return permit

    def refusing(self) -> bool:
        """Open and not yet due for a probe: a call now would be refused (one read, nothing changed)."""
        try:
            seen = self.store.read()
        except BreakerStoreError:
            return False
        return seen.state is BreakerState.OPEN and self.clock() < seen.opened_at + self.config.recovery_s

    def _claim_probe(self, seen: BreakerRecord, until: float) -> bool:
        try:
            return self.store.claim_probe(seen, self.owner, until)
        except BreakerStoreError as exc:
            logger.warning("breaker probe claim failed", extra={"model": self.model, "error": str(exc)})
            return False

    def record(self, permit: Permit, *, healthy: bool) -> None:
        """The call's outcome for the model's health (an invalid answer is healthy: the model answered)."""
        try:
            if permit is Permit.PROBE:
                self._end_probe(healthy)
            elif healthy:
                if self._failures_seen:
                    self.store.reset_failures()
            else:
                self._count_failure()
        except BreakerStoreError as exc:
            logger.warning("breaker state not recorded", extra={"model": self.model, "error": str(exc)})

    def _count_failure(self) -> None:
        after = self.store.add_failure()
        threshold = self.config.failure_threshold
        if (
            after.state is BreakerState.CLOSED
            and after.failures >= threshold
            and self.store.open(self.clock(), threshold)
        ):
            self._transition(BreakerState.CLOSED, BreakerState.OPEN, failures=after.failures)
            model_metric("BreakerOpened", MetricUnit.Count, 1, self.model)

    def _end_probe(self, healthy: bool) -> None:
        if self.store.end_probe(self.owner, healthy, self.clock()):
            target = BreakerState.CLOSED if healthy else BreakerState.OPEN
            self._transition(BreakerState.HALF_OPEN, target)
            if target is BreakerState.OPEN:
                model_metric("BreakerOpened", MetricUnit.Count, 1, self.model)

    def _transition(self, old: BreakerState, new: BreakerState, **extra: object) -> None:
        logger.info(
            "breaker transition", extra={"model": self.model, "from_state": old.value, "to_state": new.value, **extra}
        )
