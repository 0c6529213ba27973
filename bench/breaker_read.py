"""What caching a closed breaker would save: reads per job and time per admit, with and without the cache.

A container runs one job at a time, and each job admits each model it calls once (the recipe's model, then
the image's). So the question is how often the same breaker is read again within the cache's lifetime. Jobs
are replayed back to back on a virtual clock with the write-up's measured recipe times (off-peak 21-34 s,
peak 80-92 s, image ~15 s); the store is moto in-process, so the time per admit is our code plus moto, not a
DynamoDB round trip (a consistent GetItem costs a few ms in a region: what a hit would save).

    .venv/bin/python bench/breaker_read.py
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

import boto3
from moto import mock_aws

from chuixiang.resilience.breaker import BreakerConfig, CircuitBreaker, Permit
from chuixiang.stores import breaker_store
from chuixiang.stores.breaker_store import DynamoBreakerStore

JOBS = 400
CONFIG = BreakerConfig(failure_threshold=5, recovery_s=30)


class CountingTable:
    def __init__(self, table: Any) -> None:
        self.table, self.reads = table, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.table, name)

    def get_item(self, **kw: Any) -> Any:
        self.reads += 1
        return self.table.get_item(**kw)


def replay(table: CountingTable, ttl_s: float, peak: bool) -> tuple[float, float]:
    """Reads per job and µs per admit for JOBS jobs back to back in one container."""
    rng = random.Random(7)
    breaker_store._cache.clear()  # each run starts as a new container
    clock = [0.0]
    admit_us: list[float] = []
    for _ in range(JOBS):
        for model, busy_s in (
            ("recipe-model", rng.uniform(80, 92) if peak else rng.uniform(21, 34)),
            ("image-model", rng.uniform(10, 20)),
        ):
            store = DynamoBreakerStore(
                table,
                "https://model.example",
                model,  # type: ignore[arg-type]
                closed_ttl_s=ttl_s,
                monotonic=lambda: clock[0],
            )
            breaker = CircuitBreaker(store, model, CONFIG, clock=lambda: 1e9 + clock[0])
            started = time.perf_counter()
            permit = breaker.permit(busy_s)
            admit_us.append((time.perf_counter() - started) * 1e6)
            breaker.record(permit if permit is not Permit.REJECT else Permit.CALL, healthy=True)
            clock[0] += busy_s
    return table.reads / JOBS, statistics.median(admit_us)


def main() -> None:
    with mock_aws():
        ddb = boto3.resource("dynamodb", region_name="us-east-1")
        raw = ddb.create_table(
            TableName="bench",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        print(f"{JOBS} jobs back to back in one container (recipe then image, each admitted once):")
        for peak in (False, True):
            for ttl in (0.0, 1.0, 5.0, 60.0):
                table = CountingTable(raw)
                per_job, admit = replay(table, ttl, peak)
                print(
                    f"  {'peak    ' if peak else 'off-peak'}  closed cache {ttl:4.0f} s: "
                    f"{per_job:4.2f} consistent reads per job, median admit {admit:6.0f} µs"
                )


if __name__ == "__main__":
    main()
