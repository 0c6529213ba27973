"""The routing rules, specified in milliseconds: the router with fake calls, in-process (no socket).

Fallback, the breaker, the fastest-first skip, the budget, retries, the hedge won and lost, cancellation and
what each call reports. (What only sockets show, a stream that stalls or a socket closed mid-read, is in
``tests/sockets``; the Retry-After trade-off is in ``test_retry_after.py``.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from chuixiang.deadline import Budget
from chuixiang.resilience.breaker import Permit
from chuixiang.resilience.calls import CallContext, CallReport, Reply, Routed, Routes
from chuixiang.resilience.fastest import FastestFirst
from chuixiang.resilience.health import ModelHealth, Observation
from chuixiang.resilience.hedge import Hedge, HedgeBudget
from chuixiang.resilience.retry import RetryPolicy
from chuixiang.resilience.router import Router
from chuixiang.upstream.failures import (
    Cancelled,
    ConnectionDropped,
    FirstContentTimeout,
    InvalidAnswer,
    StatusError,
    UpstreamError,
)

PRIMARY, FALLBACK, THIRD = "primary", "fallback", "third"
POLICY = RetryPolicy(max_attempts=2, window_ms=1_000, min_attempt_ms=100, base_backoff_s=0.001)
Behaviour = Callable[[CallContext], Reply[str]]


def answer(context: CallContext) -> Reply[str]:
    return Reply(f"recipe from {context.model}", report=CallReport(200, 10, 90, Observation(first_content_ms=5)))


def fail(failure: UpstreamError) -> Behaviour:
    def behaviour(context: CallContext) -> Reply[str]:
        return Reply(failure=failure, report=CallReport(failure.status))

    return behaviour


def fails_after(seconds: float, failure: UpstreamError) -> Behaviour:
    """Fails ``seconds`` after its call started (no ``time.sleep``: the back-off's sleep is recorded, not slept)."""

    def behaviour(context: CallContext) -> Reply[str]:
        threading.Event().wait(seconds)
        return Reply(failure=failure)

    return behaviour


def silent(context: CallContext) -> Reply[str]:
    """Writes nothing until the call is closed (a model slow to its first token)."""
    closed = threading.Event()
    context.cancellation.listen(closed.set)
    closed.wait(5)
    raise Cancelled(context.cancellation.reason or "never closed")


def writes_after(seconds: float) -> Behaviour:
    """Writes its first text ``seconds`` after its call started, unless closed first."""

    def behaviour(context: CallContext) -> Reply[str]:
        closed = threading.Event()
        context.cancellation.listen(closed.set)
        if closed.wait(max(0.0, context.started + seconds - time.monotonic())):
            raise Cancelled(context.cancellation.reason)
        if not context.claim_first_write():
            raise Cancelled("the other call wrote first")
        return answer(context)

    return behaviour


@dataclass
class Script:
    """Each model's behaviour per attempt (the last one repeats), and every call's context."""

    behaviours: dict[str, list[Behaviour]]
    seen: list[CallContext] = field(default_factory=list)

    def __call__(self, context: CallContext) -> Reply[str]:
        self.seen.append(context)
        plays = self.behaviours[context.model]
        return plays[min(context.number, len(plays)) - 1](context)

    def models(self) -> list[str]:
        return [c.model for c in self.seen]


@dataclass
class FakeBreaker:
    answer: Permit = Permit.CALL
    recorded: list[bool] = field(default_factory=list)

    def permit(self, lease_s: float) -> Permit:
        return self.answer

    def record(self, permit: Permit, *, healthy: bool) -> None:
        self.recorded.append(healthy)

    def refusing(self) -> bool:
        return self.answer is Permit.REJECT


@dataclass
class FakeHealth:
    observed: list[Observation] = field(default_factory=list)

    def observe(self, observation: Observation) -> None:
        self.observed.append(observation)

    def read(self) -> ModelHealth:
        return ModelHealth()


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr("chuixiang.resilience.router.time.sleep", slept.append)
    return slept


def route(script: Script, routes: Routes, budget_ms: float = 60_000, policy: RetryPolicy = POLICY) -> Routed[str]:
    return Router(routes, policy, "test").route(script, Budget(budget_ms, None))


def outcomes(routed: Routed[str]) -> list[tuple[str, str]]:
    return [(c.model, c.outcome) for c in routed.calls]


def test_a_model_that_cannot_serve_falls_back_to_the_next() -> None:
    script = Script({PRIMARY: [fail(StatusError("HTTP 503", status=503))], FALLBACK: [answer]})
    routed = route(script, Routes((PRIMARY, FALLBACK)))
    assert routed.result == "recipe from fallback" and routed.model == FALLBACK and routed.failure is None
    # the early 503 was retried once on the primary (the retry rule), then the fallback answered
    assert outcomes(routed) == [(PRIMARY, "http_error"), (PRIMARY, "http_error"), (FALLBACK, "ok")]
    assert routed.attempts == 3


@pytest.mark.parametrize(
    "failure",
    [
        InvalidAnswer("not a recipe"),  # the model's quality, not its health
        ConnectionDropped("reset mid-answer", content_started=True),  # content had started
        StatusError("HTTP 400: bad parameter", status=400),  # the same request fails on any model
    ],
    ids=["bad-answer", "after-content", "refused-request"],
)
def test_no_fallback_for_what_is_not_the_models_health(failure: UpstreamError) -> None:
    script = Script({PRIMARY: [fail(failure)], FALLBACK: [answer]})
    routed = route(script, Routes((PRIMARY, FALLBACK)))
    assert script.models() == [PRIMARY] and routed.failure is failure and routed.model == PRIMARY


def test_no_fallback_when_the_budget_left_cannot_hold_an_attempt() -> None:
    script = Script({PRIMARY: [fail(StatusError("HTTP 503", status=503))], FALLBACK: [answer]})
    policy = RetryPolicy(max_attempts=1, window_ms=1_000, min_attempt_ms=10_000)
    routed = route(script, Routes((PRIMARY, FALLBACK)), budget_ms=9_000, policy=policy)
    assert script.models() == [PRIMARY] and routed.result is None and routed.model == PRIMARY


def test_an_open_breaker_passes_the_model_over_without_a_request() -> None:
    breakers = {PRIMARY: FakeBreaker(Permit.REJECT), FALLBACK: FakeBreaker()}
    script = Script({PRIMARY: [answer], FALLBACK: [answer]})
    routed = route(script, Routes((PRIMARY, FALLBACK), breaker_for=breakers.get))
    assert script.models() == [FALLBACK] and routed.model == FALLBACK
    assert outcomes(routed) == [(PRIMARY, "breaker_open"), (FALLBACK, "ok")] and routed.attempts == 1
    assert breakers[PRIMARY].recorded == [] and breakers[FALLBACK].recorded == [True]


def test_the_breaker_hears_health_but_not_quality_nor_our_own_cancellation() -> None:
    breaker = FakeBreaker()
    for failure in (StatusError("HTTP 503", status=503), InvalidAnswer("bad json"), Cancelled("job stopped")):
        route(Script({PRIMARY: [fail(failure)]}), Routes((PRIMARY,), breaker_for=lambda m: breaker))
    # the 503 twice (retried once): unhealthy; the bad answer: healthy; the cancelled call: not recorded
    assert breaker.recorded == [False, False, True]


def test_a_half_open_probe_records_its_outcome() -> None:
    breaker = FakeBreaker(Permit.PROBE)
    routed = route(Script({PRIMARY: [answer]}), Routes((PRIMARY,), breaker_for=lambda m: breaker))
    assert routed.result is not None and breaker.recorded == [True]


def test_fastest_first_skips_a_model_too_slow_for_the_time_left_but_never_the_last() -> None:
    def measured(first_content_ms: int) -> ModelHealth:
        return ModelHealth(True, 50, first_content_ms, tokens_per_s_p10=100.0, valid_rate=1.0, age_s=1)

    # 1 000 tokens at 100/s = 10 s of writing: the primary is predicted at 70 s, the fallback at 90 s
    health = {PRIMARY: measured(60_000), FALLBACK: measured(80_000), THIRD: ModelHealth()}
    fastest = FastestFirst(health, expected_tokens=1000)
    script = Script({PRIMARY: [answer], FALLBACK: [answer], THIRD: [answer]})
    routed = route(script, Routes((PRIMARY, FALLBACK, THIRD), fastest=fastest), budget_ms=50_000)
    # unmeasured (THIRD) goes after the measured ones; both measured are too slow for 50 s; the last is called
    assert outcomes(routed) == [(PRIMARY, "skipped"), (FALLBACK, "skipped"), (THIRD, "ok")]
    assert routed.attempts == 1


def test_an_early_transient_failure_is_retried_and_a_late_one_is_not(no_backoff: list[float]) -> None:
    unavailable = StatusError("HTTP 503", status=503)
    early = route(Script({PRIMARY: [fail(unavailable), answer]}), Routes((PRIMARY,)))
    assert outcomes(early) == [(PRIMARY, "http_error"), (PRIMARY, "ok")] and len(no_backoff) == 1
    window_5ms = RetryPolicy(max_attempts=2, window_ms=5, min_attempt_ms=0)
    late = route(Script({PRIMARY: [fails_after(0.02, unavailable), answer]}), Routes((PRIMARY,)), policy=window_5ms)
    assert outcomes(late) == [(PRIMARY, "http_error")] and late.failure is unavailable


def test_each_call_is_recorded_once_with_its_report_and_its_health() -> None:
    health = {PRIMARY: FakeHealth(), FALLBACK: FakeHealth()}
    timed_out = FirstContentTimeout("nothing written in 1 s")

    def waited(context: CallContext) -> Reply[str]:
        return Reply(failure=timed_out, report=CallReport(200, 12, None, Observation(first_content_ms=1_000)))

    routed = route(Script({PRIMARY: [waited], FALLBACK: [answer]}), Routes((PRIMARY, FALLBACK), health_for=health.get))
    first, second = routed.calls
    assert (first.outcome, first.status, first.promptTokens, first.completionTokens) == (
        "first_content_timeout",
        200,
        12,
        None,
    )
    assert (second.outcome, second.status, second.tokens) == ("ok", 200, 100)
    assert health[PRIMARY].observed == [Observation(first_content_ms=1_000)]
    assert health[FALLBACK].observed == [Observation(first_content_ms=5)]


def test_a_call_may_raise_its_failure_and_then_reports_nothing() -> None:
    def raises(context: CallContext) -> Reply[str]:
        raise StatusError("HTTP 400", status=400)

    routed = route(Script({PRIMARY: [raises]}), Routes((PRIMARY,)))
    assert outcomes(routed) == [(PRIMARY, "http_error")] and routed.calls[0].status == 400
    assert routed.calls[0].tokens == 0


HEDGE_AFTER_MS = 50


def hedged(script: Script, budget: HedgeBudget | None = None) -> Routed[str]:
    hedge = Hedge(HEDGE_AFTER_MS, budget or HedgeBudget())
    return route(script, Routes((PRIMARY, FALLBACK, THIRD), hedge=hedge))


def started(script: Script, model: str) -> float:
    return next(c.started for c in script.seen if c.model == model)


def test_a_primary_silent_past_the_hedge_delay_races_the_next_model_and_the_first_to_write_wins() -> None:
    script = Script({PRIMARY: [silent], FALLBACK: [writes_after(0)], THIRD: [answer]})
    routed = hedged(script)
    assert routed.result == "recipe from fallback" and routed.model == FALLBACK
    assert sorted(outcomes(routed)) == [(FALLBACK, "ok"), (PRIMARY, "hedge_lost")]
    # the hedge started the hedge delay after the primary's call, both on the router's clock
    assert HEDGE_AFTER_MS / 1000 <= started(script, FALLBACK) - started(script, PRIMARY) < HEDGE_AFTER_MS / 1000 + 0.5


def test_a_primary_that_writes_first_keeps_the_job_and_the_hedge_is_closed() -> None:
    script = Script({PRIMARY: [writes_after(0.1)], FALLBACK: [silent], THIRD: [answer]})
    routed = hedged(script)
    assert routed.result == "recipe from primary" and routed.model == PRIMARY
    assert sorted(outcomes(routed)) == [(FALLBACK, "hedge_lost"), (PRIMARY, "ok")]


def test_a_primary_that_writes_in_time_is_not_hedged() -> None:
    script = Script({PRIMARY: [writes_after(0)], FALLBACK: [answer], THIRD: [answer]})
    routed = hedged(script)
    assert script.models() == [PRIMARY] and outcomes(routed) == [(PRIMARY, "ok")]


def test_no_hedge_once_the_endpoints_hedge_budget_is_spent() -> None:
    script = Script({PRIMARY: [writes_after(0.1)], FALLBACK: [answer], THIRD: [answer]})
    routed = hedged(script, HedgeBudget(share=0.0, burst=0.0))
    assert script.models() == [PRIMARY] and routed.model == PRIMARY


def test_when_both_racers_fail_the_router_falls_back_past_them() -> None:
    unavailable = fail(StatusError("HTTP 503", status=503))
    late = fails_after(0.1, StatusError("HTTP 503", status=503))
    script = Script({PRIMARY: [late, unavailable], FALLBACK: [unavailable], THIRD: [answer]})
    routed = hedged(script)
    assert routed.model == THIRD and routed.result == "recipe from third"


def test_a_call_closed_from_outside_ends_routing_with_no_fallback() -> None:
    def closed(context: CallContext) -> Reply[str]:
        context.cancellation.cancel("the job was stopped")
        return silent(context)

    script = Script({PRIMARY: [closed], FALLBACK: [answer]})
    routed = route(script, Routes((PRIMARY, FALLBACK)))
    assert isinstance(routed.failure, Cancelled) and script.models() == [PRIMARY]
    assert outcomes(routed) == [(PRIMARY, "cancelled")]


def test_the_keys_quota_never_counts_in_the_models_breaker() -> None:
    """A 429 is the key's quota (requests at once, tokens per minute), not the model's health: a key that is
    full must not open the breaker for every job of the stack. The call is not recorded; as a half-open probe's
    answer it closes the breaker (the model is there to answer)."""
    quota = StatusError("HTTP 429: rate limit", status=429)
    for permit, recorded in ((Permit.CALL, []), (Permit.PROBE, [True])):
        breaker = FakeBreaker(permit)
        routed = route(Script({PRIMARY: [fail(quota)]}), Routes((PRIMARY,), breaker_for={PRIMARY: breaker}.get))
        assert routed.failure is not None and routed.failure.quota
        assert breaker.recorded == recorded * routed.attempts, (permit, breaker.recorded)
    five_hundred = FakeBreaker()
    down = Script({PRIMARY: [fail(StatusError("HTTP 503", status=503))]})
    route(down, Routes((PRIMARY,), breaker_for={PRIMARY: five_hundred}.get))
    assert five_hundred.recorded and not any(five_hundred.recorded)  # a 5xx still counts against the model
