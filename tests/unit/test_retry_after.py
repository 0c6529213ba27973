"""A model that answers 429 with ``Retry-After`` is waited out only when waiting beats the next model: by the
predicted time to a recipe when both are measured, else only for a wait within the back-off's own scale.
(The review's case: Retry-After 60 on the primary was waited out while a healthy fallback would have
answered in ~15 s.) In-process: fake calls, the sleeps recorded, not slept."""

from __future__ import annotations

from typing import Any

import pytest

from chuixiang.deadline import Budget
from chuixiang.resilience.calls import CallContext, Reply, Routes
from chuixiang.resilience.fastest import FastestFirst
from chuixiang.resilience.health import ModelHealth
from chuixiang.resilience.retry import RetryPolicy
from chuixiang.resilience.router import Router
from chuixiang.upstream.failures import StatusError

POLICY = RetryPolicy(max_attempts=3, window_ms=10_000, min_attempt_ms=1_000)
PRIMARY, FALLBACK = "primary", "fallback"


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waits: list[float] = []
    monkeypatch.setattr("chuixiang.resilience.router.time.sleep", waits.append)
    return waits


def _route(retry_after_s: float, fastest: FastestFirst | None = None) -> tuple[list[str], Any]:
    """The primary refuses once with ``Retry-After``, then answers; the fallback always answers."""
    called: list[str] = []

    def call(context: CallContext) -> Reply[str]:
        called.append(context.model)
        if context.model == PRIMARY and called.count(PRIMARY) == 1:
            raise StatusError("HTTP 429: slow down", status=429, retry_after_s=retry_after_s)
        return Reply(f"recipe from {context.model}")

    routed = Router(Routes((PRIMARY, FALLBACK), fastest=fastest), POLICY, "recipe").route(call, Budget(600_000, None))
    return called, routed


def _measured(primary_s: float, fallback_s: float) -> FastestFirst:
    """Two models whose predicted time to a recipe is ``primary_s`` and ``fallback_s`` (1 000 tokens at 100/s
    = 10 s of writing, plus first content)."""

    def health(total_s: float) -> ModelHealth:
        return ModelHealth(
            known=True,
            samples=50,
            first_content_p90_ms=int((total_s - 10) * 1000),
            tokens_per_s_p10=100.0,
            valid_rate=1.0,
            age_s=60,
        )

    return FastestFirst({PRIMARY: health(primary_s), FALLBACK: health(fallback_s)}, expected_tokens=1000)


def test_unmeasured_a_long_retry_after_moves_on_at_once(slept: list[float]) -> None:
    called, routed = _route(60)
    assert called == [PRIMARY, FALLBACK] and routed.model == FALLBACK and slept == []


def test_unmeasured_a_short_retry_after_is_waited_out(slept: list[float]) -> None:
    called, routed = _route(1)
    assert called == [PRIMARY, PRIMARY] and routed.model == PRIMARY and slept == [pytest.approx(1, abs=1)]


@pytest.mark.parametrize(("retry_after_s", "waits"), [(5, True), (25, False)])
def test_measured_the_wait_is_taken_when_it_beats_the_next_models_finish(
    slept: list[float], retry_after_s: float, waits: bool
) -> None:
    """Primary 15 s, fallback 35 s: waiting 5 s (20 s in all) beats 35; waiting 25 s (40 s) does not."""
    called, routed = _route(retry_after_s, _measured(15, 35))
    assert (routed.model == PRIMARY) is waits and (slept != []) is waits, (called, slept)


def test_with_no_next_model_the_budget_decides_as_before(slept: list[float]) -> None:
    def call(context: CallContext) -> Reply[str]:
        if not slept:
            raise StatusError("HTTP 429", status=429, retry_after_s=60)
        return Reply("recipe")

    routed = Router(Routes((PRIMARY,)), POLICY, "recipe").route(call, Budget(600_000, None))
    assert routed.result == "recipe" and slept == [60]
