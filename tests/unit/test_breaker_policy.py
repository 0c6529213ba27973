"""The breaker policy without moto (an in-memory store), and the same contract on the DynamoDB store.

The policy (``resilience.breaker``) talks to model health only through the ``BreakerStore`` protocol,
so every transition is checked here in microseconds; the same cases then run against the DynamoDB
store (in-process moto) so the two cannot drift apart.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from chuixiang.resilience.breaker import (
    BreakerConfig,
    BreakerRecord,
    BreakerState,
    BreakerStoreError,
    CircuitBreaker,
    Permit,
)
from chuixiang.stores.breaker_store import DynamoBreakerStore

CONFIG = BreakerConfig(failure_threshold=3, recovery_s=30)


class MemoryBreakerStore:
    """The ``BreakerStore`` protocol in memory, each operation atomic under one lock."""

    def __init__(self) -> None:
        self.record = BreakerRecord()
        self.owner: str | None = None
        self.lock = threading.Lock()
        self.reads = 0

    def read(self) -> BreakerRecord:
        self.reads += 1
        return self.record

    def claim_probe(self, seen: BreakerRecord, owner: str, until: float) -> bool:
        with self.lock:
            now = self.record
            same = now.state is seen.state and (
                now.opened_at == seen.opened_at
                if seen.state is BreakerState.OPEN
                else now.probe_until == seen.probe_until
            )
            if not same:
                return False
            self.record, self.owner = replace(now, state=BreakerState.HALF_OPEN, probe_until=until), owner
            return True

    def add_failure(self) -> BreakerRecord:
        with self.lock:
            self.record = replace(self.record, failures=self.record.failures + 1)
            return self.record

    def open(self, now: float, threshold: int) -> bool:
        with self.lock:
            if self.record.state is not BreakerState.CLOSED or self.record.failures < threshold:
                return False
            self.record = replace(self.record, state=BreakerState.OPEN, opened_at=now)
            return True

    def reset_failures(self) -> None:
        with self.lock:
            if self.record.state is BreakerState.CLOSED:
                self.record = replace(self.record, failures=0)

    def end_probe(self, owner: str, healthy: bool, now: float) -> bool:
        with self.lock:
            if self.owner != owner:
                return False
            self.owner = None
            self.record = (
                BreakerRecord() if healthy else BreakerRecord(BreakerState.OPEN, self.record.failures, opened_at=now)
            )
            return True


@pytest.fixture(params=["memory", "dynamodb"])
def store_for(request: pytest.FixtureRequest) -> Iterator[Callable[[], Any]]:
    """A factory of stores that share one model's state (as invocations in many containers do)."""
    if request.param == "memory":
        shared = MemoryBreakerStore()
        yield lambda: shared
    else:
        table = request.getfixturevalue("table")
        yield lambda: DynamoBreakerStore(table, "http://model", "m")


def test_closed_calls_and_the_threshold_opens_it_once(store_for: Callable[[], Any]) -> None:
    now = [1000.0]
    breakers = [CircuitBreaker(store_for(), "m", CONFIG, clock=lambda: now[0]) for _ in range(3)]
    for b in breakers:  # three invocations, one failure each: the count is shared
        assert b.permit(5) is Permit.CALL
        b.record(Permit.CALL, healthy=False)
    assert store_for().read().state is BreakerState.OPEN
    assert breakers[0].permit(5) is Permit.REJECT


def test_a_healthy_call_resets_the_count(store_for: Callable[[], Any]) -> None:
    b = CircuitBreaker(store_for(), "m", CONFIG, clock=lambda: 1000.0)
    for healthy in (False, False, True, False, False):
        b.record(b.permit(5), healthy=healthy)
    assert store_for().read() == BreakerRecord(BreakerState.CLOSED, 2)


def test_after_recovery_exactly_one_invocation_probes_and_its_outcome_decides(store_for: Callable[[], Any]) -> None:
    now = [1000.0]
    first = CircuitBreaker(store_for(), "m", CONFIG, clock=lambda: now[0])
    for _ in range(3):
        first.record(first.permit(5), healthy=False)
    now[0] += CONFIG.recovery_s
    contenders = [CircuitBreaker(store_for(), "m", CONFIG, clock=lambda: now[0]) for _ in range(4)]
    permits = [c.permit(5) for c in contenders]
    assert permits.count(Permit.PROBE) == 1 and permits.count(Permit.REJECT) == 3
    prober = contenders[permits.index(Permit.PROBE)]
    prober.record(Permit.PROBE, healthy=False)  # the probe failed: open again, from now
    assert store_for().read().state is BreakerState.OPEN
    assert store_for().read().opened_at == pytest.approx(now[0])
    now[0] += CONFIG.recovery_s
    again = CircuitBreaker(store_for(), "m", CONFIG, clock=lambda: now[0])
    assert again.permit(5) is Permit.PROBE
    again.record(Permit.PROBE, healthy=True)
    assert store_for().read() == BreakerRecord()


def test_a_probe_whose_invocation_died_is_taken_over_after_its_lease(store_for: Callable[[], Any]) -> None:
    now = [1000.0]
    b = CircuitBreaker(store_for(), "m", CONFIG, clock=lambda: now[0])
    for _ in range(3):
        b.record(b.permit(5), healthy=False)
    now[0] += CONFIG.recovery_s
    assert b.permit(lease_s=5) is Permit.PROBE  # ...and this invocation dies without recording
    other = CircuitBreaker(store_for(), "m", CONFIG, clock=lambda: now[0])
    assert other.permit(5) is Permit.REJECT  # within the lease
    now[0] += 5
    assert other.permit(5) is Permit.PROBE
    assert b.store.end_probe(b.owner, True, now[0]) is False  # the dead one's late record changes nothing


class _BrokenStore(MemoryBreakerStore):
    def read(self) -> BreakerRecord:
        raise BreakerStoreError("throttled")

    def add_failure(self) -> BreakerRecord:
        raise BreakerStoreError("throttled")


def test_a_failing_store_never_fails_the_call() -> None:
    b = CircuitBreaker(_BrokenStore(), "m", CONFIG)
    assert b.permit(5) is Permit.CALL
    b.record(Permit.CALL, healthy=False)  # logged, not raised


def test_the_dynamodb_store_turns_aws_errors_into_store_errors() -> None:
    class Throttled:
        def get_item(self, **kw: Any) -> Any:
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException"}}, "GetItem")

    with pytest.raises(BreakerStoreError) as raised:
        DynamoBreakerStore(Throttled(), "http://model", "m").read()  # type: ignore[arg-type]
    assert raised.value.__cause__ is not None  # raised from the AWS error


def test_the_closed_cache_serves_reads_until_its_ttl_and_any_write_drops_it(table: Any) -> None:
    now = [0.0]
    cached = DynamoBreakerStore(table, "http://model", "cached", closed_ttl_s=2.0, monotonic=lambda: now[0])
    calls: list[str] = []
    get_item = table.get_item

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(table, name)

        def get_item(self, **kw: Any) -> Any:
            calls.append("get")
            return get_item(**kw)

    cached.table = Counting()  # type: ignore[assignment]
    assert cached.read() == cached.read() == BreakerRecord()
    assert len(calls) == 1
    now[0] = 2.5
    cached.read()
    assert len(calls) == 2
    cached.add_failure()  # this container's own write: the cached closed state is gone
    assert cached.read().failures == 1 and len(calls) == 3
    cached.read()  # a record with failures is never cached
    assert len(calls) == 4


def test_each_answer_is_recorded_as_the_breaker_state_gauge(capsys: pytest.CaptureFixture[str]) -> None:
    """``BreakerState`` per call, as the on-call reads it (its maximum over 5 minutes): 0 closed, 0.5 a probe
    let through, 1 open and refusing. Its transitions alone (``BreakerOpened``) cannot say it is open now."""
    now = [1000.0]
    shared = MemoryBreakerStore()
    breaker = CircuitBreaker(shared, "m", CONFIG, clock=lambda: now[0])
    for _ in range(3):
        breaker.record(breaker.permit(5), healthy=False)
    assert breaker.permit(5) is Permit.REJECT
    now[0] += CONFIG.recovery_s
    assert breaker.permit(5) is Permit.PROBE
    gauges = [
        doc["BreakerState"]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("{") and '"BreakerState"' in line
        for doc in [json.loads(line)]
    ]
    assert [g[0] if isinstance(g, list) else g for g in gauges] == [0.0, 0.0, 0.0, 1.0, 0.5]
