"""Route a call over a model and its fallbacks, each behind its shared circuit breaker.

For each model in order: if its breaker is open, move on at once (no request).
Otherwise run the attempt loop on it (same-model retries follow the retry rule).
Move to the next model only when the last failure says the model could not serve
now (:attr:`UpstreamError.unhealthy`: 5xx, 429, refused or reset before any
content, the first-content limit, an open breaker) and the budget left still holds
``min_attempt_ms``. Never after content has started, never for a bad answer: that
is the model's quality, not its health. Every upstream call is recorded once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ..deadline import Budget
from ..models import UpstreamCall
from ..observability import logger
from ..upstream.failures import Cancelled, CircuitOpen, UpstreamError
from .breaker import Admission, CircuitBreaker
from .health import HealthStore, ModelHealth
from .retry import Attempt, RetryPolicy, run_attempts

T = TypeVar("T")


@dataclass
class Routed(Generic[T]):
    result: T | None = None
    failure: UpstreamError | None = None
    model: str | None = None  #: the model that answered (or the last one tried)
    attempts: int = 0
    calls: list[UpstreamCall] = field(default_factory=list)


class FastestFirst:
    """``RecipeRouting=fastest``: the candidates in order of their predicted time to a whole recipe (pessimistic:
    p90 first content, p10 writing speed), the ones with no recent measurement after, in their configured
    order; a model predicted not to finish in the time left is skipped without a request, unless it is the last."""

    def __init__(self, health: dict[str, ModelHealth], expected_tokens: int) -> None:
        self.health, self.expected_tokens = health, expected_tokens

    def order(self, models: Sequence[str]) -> list[str]:
        known = [m for m in models if self.health[m].known]
        unknown = [m for m in models if not self.health[m].known]
        return sorted(known, key=lambda m: self.health[m].predicted_ms(self.expected_tokens) or 0.0) + unknown

    def skip(self, model: str, remaining_ms: float, last: bool) -> str | None:
        """Why ``model`` is not worth a request now (None: call it)."""
        predicted = self.health[model].predicted_ms(self.expected_tokens)
        if last or predicted is None or predicted <= remaining_ms:
            return None
        return f"predicted {predicted:.0f} ms to a recipe, {remaining_ms:.0f} ms left"


def call_models(models: Sequence[str], call: Callable[[str, Attempt], T], *, upstream: str, policy: RetryPolicy,
                budget: Budget, breaker_for: Callable[[str], CircuitBreaker | None] | None = None,
                lease_s: float = 0, health_for: Callable[[str], HealthStore] | None = None,
                fastest: FastestFirst | None = None) -> Routed[T]:
    """``call(model, attempt)`` makes one upstream call; ``breaker_for(model)`` its breaker (None: no breaker);
    ``health_for(model)`` where its measured health is kept (each call's observation is added to it);
    ``fastest``: skip a model that cannot finish in time (the order is the caller's)."""
    routed: Routed[T] = Routed()
    for index, model in enumerate(models):
        if index and routed.failure is not None:
            left = budget.remaining_ms()
            if left < policy.min_attempt_ms:
                logger.info("no fallback: too little budget", extra={
                    "model": model, "remaining_ms": round(left), "min_attempt_ms": policy.min_attempt_ms})
                break
        if fastest is not None and (why := fastest.skip(model, budget.remaining_ms(), index == len(models) - 1)):
            logger.info("model skipped: too slow for the time left", extra={"model": model, "reason": why})
            routed.calls.append(UpstreamCall(model=model, ms=0, outcome="skipped"))
            continue
        breaker = breaker_for(model) if breaker_for else None
        health = health_for(model) if health_for else None

        def guarded(attempt: Attempt, model: str = model, breaker: CircuitBreaker | None = breaker,
                    health: HealthStore | None = health) -> T:
            admission = breaker.admit(lease_s) if breaker else Admission.CALL
            attempt.fields["model"] = model
            if admission is Admission.REJECT:
                routed.calls.append(UpstreamCall(model=model, ms=0, outcome=CircuitOpen.outcome))
                raise CircuitOpen(f"breaker open for {model}: no request sent")
            if admission is Admission.PROBE:
                attempt.fields["breaker_probe"] = True
            # The retry window judges the upstream: the breaker's DynamoDB read and write are not in it.
            attempt.begin()
            try:
                result = call(model, attempt)
            except UpstreamError as failure:
                attempt.end()
                if health and attempt.observation:
                    health.observe(attempt.observation)
                routed.calls.append(UpstreamCall(model=model, ms=int(attempt.elapsed_ms()), outcome=failure.outcome,
                                                 status=failure.status or attempt.status,
                                                 promptTokens=attempt.prompt_tokens,
                                                 completionTokens=attempt.completion_tokens))
                if breaker and not isinstance(failure, Cancelled):  # closed by us: says nothing of the model
                    breaker.record(admission, healthy=not failure.unhealthy)
                raise
            attempt.end()
            if health and attempt.observation:
                health.observe(attempt.observation)
            routed.calls.append(UpstreamCall(model=model, ms=int(attempt.elapsed_ms()), outcome="ok",
                                             status=attempt.status, promptTokens=attempt.prompt_tokens,
                                             completionTokens=attempt.completion_tokens))
            if breaker:
                breaker.record(admission, healthy=True)
            return result

        attempts = run_attempts(guarded, upstream=upstream, policy=policy, budget=budget)
        routed.model = model
        routed.result, routed.failure = attempts.result, attempts.failure
        if attempts.failure is None or not attempts.failure.unhealthy:
            break
    routed.attempts = sum(1 for c in routed.calls if c.outcome not in (CircuitOpen.outcome, "skipped"))
    return routed

