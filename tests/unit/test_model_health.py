"""A model's measured health: histograms added per call, pessimistic percentiles, an age past which it says
nothing, and the order ``fastest`` routing takes from it."""

from __future__ import annotations

from typing import Any

from chuixiang.resilience.fastest import FastestFirst
from chuixiang.resilience.health import ModelHealth, Observation, percentile_bucket, summarise
from chuixiang.stores.health_store import DynamoHealthStore

HOUR = 3600.0


def test_percentiles_are_the_pessimistic_edge_of_their_bucket() -> None:
    assert percentile_bucket([0, 0, 0], 0.9) is None
    assert percentile_bucket([5, 4, 1], 0.9) == 1 and percentile_bucket([5, 4, 1], 0.1) == 0
    # the write-up's evening: first content 80-92 s, 18 tokens/s: p90 in the 90 s bucket, p10 at 15 tokens/s
    fc = [0, 0, 0, 0, 0, 0, 0, 9, 1, 0]  # nine calls in (60, 90] s, one in (90, 120] s
    sp = [0, 0, 0, 10, 0, 0, 0, 0]
    health = summarise(fc, sp, valid=9, answered=10, age_s=10, max_age_s=HOUR)
    assert (health.first_content_p90_ms, health.tokens_per_s_p10, health.valid_rate) == (90_000, 15.0, 0.9)
    assert health.predicted_ms(1600) == 90_000 + 1600 / 15 * 1000


def test_a_record_older_than_the_maximum_age_says_nothing() -> None:
    old = summarise([1] * 10, [1] * 8, valid=1, answered=1, age_s=HOUR + 1, max_age_s=HOUR)
    assert not old.known and old.predicted_ms(1600) is None


def test_the_store_adds_each_call_in_one_write_and_reads_this_hour_and_the_last(table: Any) -> None:
    now = [10 * HOUR + 1800]
    writes: list[str] = []

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(table, name)

        def update_item(self, **kw: Any) -> Any:
            writes.append(kw["UpdateExpression"])
            return table.update_item(**kw)

    store = DynamoHealthStore(
        Counting(),  # type: ignore[arg-type]  # the table, counting its calls
        "https://m.example/v1",
        "m",
        max_age_s=HOUR,
        clock=lambda: now[0],
    )
    assert not store.read().known  # nothing measured yet
    store.observe(Observation(first_content_ms=25_000, tokens_per_s=18.0, valid=True))
    now[0] += HOUR  # the next hour: the previous one is still read
    store.observe(Observation(first_content_ms=95_000, valid=False))  # no speed: it never wrote for a second
    assert len(writes) == 2 and all(w.startswith("ADD ") for w in writes)
    health = store.read()
    assert health.known and health.samples == 2 and health.valid_rate == 0.5
    assert health.first_content_p90_ms == 120_000 and health.tokens_per_s_p10 == 15.0
    assert health.rate_limited_age_s is None
    store.observe(Observation(rate_limited=True))  # a 429: dated, so auto writes whole for a while
    now[0] += 42
    assert store.read().rate_limited_age_s == 42 and "rateLimitedAt" in writes[-1]
    now[0] += 2 * HOUR  # two hours on: neither hour is read any more
    assert not store.read().known and store.read().rate_limited_age_s is None


def test_fastest_orders_by_prediction_keeps_the_unknown_and_skips_who_cannot_finish() -> None:
    fast = ModelHealth(known=True, samples=9, first_content_p90_ms=5_000, tokens_per_s_p10=50.0)
    slow = ModelHealth(known=True, samples=9, first_content_p90_ms=90_000, tokens_per_s_p10=15.0)
    routing = FastestFirst({"slow": slow, "fast": fast, "new": ModelHealth()}, expected_tokens=1600)
    assert routing.order(["slow", "new", "fast"]) == ["fast", "slow", "new"]
    assert routing.skip("slow", remaining_ms=60_000, last=False)  # 196 s predicted
    assert routing.skip("slow", remaining_ms=60_000, last=True) is None  # the last is always tried
    assert routing.skip("fast", remaining_ms=60_000, last=False) is None
    assert routing.skip("new", remaining_ms=1, last=False) is None  # nothing measured: no reason to skip


def test_fastest_puts_a_model_whose_recipes_often_fail_last_however_fast() -> None:
    """The write-up's fast model that often runs out of tokens: its bad answers end the job (no fallback for a
    bad answer), so speed does not buy it the first place."""
    steady = ModelHealth(known=True, samples=9, first_content_p90_ms=5_000, tokens_per_s_p10=30.0, valid_rate=1.0)
    fast = ModelHealth(known=True, samples=9, first_content_p90_ms=2_000, tokens_per_s_p10=80.0, valid_rate=0.6)
    routing = FastestFirst({"steady": steady, "fast": fast, "new": ModelHealth()}, expected_tokens=1600)
    assert routing.order(["fast", "new", "steady"]) == ["steady", "new", "fast"]
