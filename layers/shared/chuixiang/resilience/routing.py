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

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ..deadline import Budget
from ..models import UpstreamCall
from ..observability import logger
from ..upstream.failures import Cancelled, CircuitOpen, UpstreamError
from ..upstream.transport import Cancellation
from .breaker import Admission, CircuitBreaker
from .health import HealthStore, ModelHealth
from .retry import Attempt, Attempts, RetryPolicy, run_attempts

T = TypeVar("T")


@dataclass
class Routed(Generic[T]):
    result: T | None = None
    failure: UpstreamError | None = None
    model: str | None = None  #: the model that answered (or the last one tried)
    attempts: int = 0
    calls: list[UpstreamCall] = field(default_factory=list)


class FastestFirst:
    """``RecipeRouting=fastest``: the candidates in order of their predicted time to a valid recipe (pessimistic:
    p90 first content, p10 writing speed, over the valid rate), the ones with no recent measurement after, in
    their configured order; a model predicted not to finish in the time left is skipped without a request,
    unless it is the last."""

    def __init__(self, health: dict[str, ModelHealth], expected_tokens: int) -> None:
        self.health, self.expected_tokens = health, expected_tokens

    #: A model whose recipes are valid less often than this goes after every other (unknown ones included):
    #: its failures end the job (a bad answer is not a reason to fall back), however fast it is.
    MIN_VALID_RATE = 0.9

    def order(self, models: Sequence[str]) -> list[str]:
        known = [m for m in models if self.health[m].known]
        unknown = [m for m in models if not self.health[m].known]
        unreliable = [m for m in known if (self.health[m].valid_rate or 1.0) < self.MIN_VALID_RATE]
        fast = sorted(
            (m for m in known if m not in unreliable),
            key=lambda m: self.health[m].expected_ms(self.expected_tokens) or 0.0,
        )
        return fast + unknown + sorted(unreliable, key=lambda m: self.health[m].expected_ms(self.expected_tokens) or 0)

    def predicted(self, model: str) -> float | None:
        """``model``'s pessimistic time to a recipe, when measured (None: not measured lately)."""
        health = self.health.get(model)
        return health.predicted_ms(self.expected_tokens) if health is not None else None

    def skip(self, model: str, remaining_ms: float, last: bool) -> str | None:
        """Why ``model`` is not worth a request now (None: call it)."""
        predicted = self.health[model].predicted_ms(self.expected_tokens)
        if last or predicted is None or predicted <= remaining_ms:
            return None
        return f"predicted {predicted:.0f} ms to a recipe, {remaining_ms:.0f} ms left"


class HedgeRace:
    """Two calls racing to the model's first text: the first to write wins, the other is closed at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.winner: str | None = None
        self.decided = threading.Event()
        self._calls: dict[str, Cancellation] = {}
        #: When each model's first request started (monotonic): the hedge's clock runs from the primary's.
        self.began: dict[str, float] = {}
        self.first_began = threading.Event()

    def enter(self, model: str, attempt: Attempt) -> None:
        """``attempt`` of ``model`` starts: it can be closed from now on (at once if the race went to the other)."""
        with self._lock:
            self._calls[model] = attempt.cancellation
            lost = self.winner not in (None, model)
        if lost:
            attempt.cancellation.cancel(f"hedge lost: {self.winner} wrote first")

    def begin(self, model: str, at: float) -> None:
        """``model``'s request started at ``at``: the first one starts the clock the hedge is measured on."""
        with self._lock:
            self.began.setdefault(model, at)
        self.first_began.set()

    def claim(self, model: str) -> bool:
        """``model`` wrote: True if it won (or had already), False if the other had."""
        with self._lock:
            if self.winner is not None:
                return self.winner == model
            self.winner = model
            losers = [c for m, c in self._calls.items() if m != model]
        self.decided.set()
        for cancellation in losers:
            cancellation.cancel(f"hedge lost: {model} wrote first")
        return True

    def lost(self, model: str) -> bool:
        return self.winner not in (None, model)


class HedgeBudget:
    """At most ``share`` of one endpoint's jobs in this container get a hedge, so a slow hour cannot double the
    model bill: a token bucket where each job adds ``share`` of a token (up to ``burst``) and a hedge takes one."""

    def __init__(self, share: float = 0.2, burst: float = 2.0) -> None:
        self.share, self.burst = share, burst
        self.tokens = burst
        self._lock = threading.Lock()

    def earn(self) -> None:
        with self._lock:
            self.tokens = min(self.burst, self.tokens + self.share)

    def take(self) -> bool:
        with self._lock:
            if self.tokens < 1:
                return False
            self.tokens -= 1
            return True


_BUDGETS: dict[str, HedgeBudget] = {}
_BUDGETS_LOCK = threading.Lock()


def hedge_budget(endpoint: str) -> HedgeBudget:
    """The hedge budget of one endpoint, shared by every job of this container."""
    with _BUDGETS_LOCK:
        return _BUDGETS.setdefault(endpoint.rstrip("/"), HedgeBudget())


@dataclass(frozen=True)
class Hedge:
    """``RecipeHedgeAfterMs``: when the model has written nothing for this long (or for its measured p90 first
    content, if known and shorter), the next candidate is called too; the first to write wins. One per job."""

    after_ms: float
    budget: HedgeBudget
    health: dict[str, ModelHealth] = field(default_factory=dict)

    def after_s(self, model: str) -> float:
        measured = self.health.get(model)
        p90 = measured.first_content_p90_ms if measured is not None and measured.known else None
        return min(self.after_ms, p90 or self.after_ms) / 1000


def call_models(
    models: Sequence[str],
    call: Callable[[str, Attempt], T],
    *,
    upstream: str,
    policy: RetryPolicy,
    budget: Budget,
    breaker_for: Callable[[str], CircuitBreaker | None] | None = None,
    lease_s: float = 0,
    health_for: Callable[[str], HealthStore] | None = None,
    fastest: FastestFirst | None = None,
    hedge: Hedge | None = None,
) -> Routed[T]:
    """``call(model, attempt)`` makes one upstream call; ``breaker_for(model)`` its breaker (None: no breaker);
    ``health_for(model)`` where its measured health is kept (each call's observation is added to it);
    ``fastest``: skip a model that cannot finish in time (the order is the caller's); ``hedge``: race the
    next model against one that is slow to write (see :class:`Hedge`)."""
    routed: Routed[T] = Routed()
    if hedge is not None:
        hedge.budget.earn()

    def guarded_for(model: str, race: HedgeRace | None = None) -> Callable[[Attempt], T]:
        breaker = breaker_for(model) if breaker_for else None
        health = health_for(model) if health_for else None

        def guarded(attempt: Attempt) -> T:
            admission = breaker.admit(lease_s) if breaker else Admission.CALL
            attempt.fields["model"] = model
            if admission is Admission.REJECT:
                routed.calls.append(UpstreamCall(model=model, ms=0, outcome=CircuitOpen.outcome))
                raise CircuitOpen(f"breaker open for {model}: no request sent")
            if admission is Admission.PROBE:
                attempt.fields["breaker_probe"] = True
            if race is not None:
                race.enter(model, attempt)
                attempt.first_text = lambda: race.claim(model)
            # The retry window judges the upstream: the breaker's DynamoDB read and write are not in it.
            attempt.begin()
            if race is not None:
                race.begin(model, attempt.started)
            try:
                result = call(model, attempt)
            except UpstreamError as failure:
                attempt.end()
                if health and attempt.observation:
                    health.observe(attempt.observation)
                lost = race is not None and isinstance(failure, Cancelled) and race.lost(model)
                routed.calls.append(
                    UpstreamCall(
                        model=model,
                        ms=int(attempt.elapsed_ms()),
                        outcome="hedge_lost" if lost else failure.outcome,
                        status=failure.status or attempt.status,
                        promptTokens=attempt.prompt_tokens,
                        completionTokens=attempt.completion_tokens,
                    )
                )
                if breaker and not isinstance(failure, Cancelled):  # closed by us: says nothing of the model
                    breaker.record(admission, healthy=not failure.unhealthy)
                raise
            attempt.end()
            if health and attempt.observation:
                health.observe(attempt.observation)
            routed.calls.append(
                UpstreamCall(
                    model=model,
                    ms=int(attempt.elapsed_ms()),
                    outcome="ok",
                    status=attempt.status,
                    promptTokens=attempt.prompt_tokens,
                    completionTokens=attempt.completion_tokens,
                )
            )
            if breaker:
                breaker.record(admission, healthy=True)
            return result

        return guarded

    def race(model: str, partner: str, hedge: Hedge) -> tuple[str, Attempts[T], bool]:
        """``model``'s attempts, and ``partner``'s too once ``model`` is slow to write: (the model that
        answered, its attempts, whether the partner was called)."""
        contest = HedgeRace()

        def run(m: str) -> Attempts[T]:
            return run_attempts(guarded_for(m, contest), upstream=upstream, policy=policy, budget=budget)

        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="hedge") as pool:
            first = pool.submit(run, model)
            # "Written nothing for that long" counts from the model's request, not from this thread's start:
            # the breaker's read and the connection before it are not the model's silence.
            while not first.done() and not contest.first_began.wait(0.05):
                pass
            hedge_at = contest.began.get(model, time.monotonic()) + hedge.after_s(model)
            while not first.done() and not contest.decided.is_set() and (left := hedge_at - time.monotonic()) > 0:
                contest.decided.wait(min(left, 0.05))
            if first.done() or contest.decided.is_set():
                return model, first.result(), False
            if not hedge.budget.take():
                logger.info("no hedge: this endpoint's hedge budget is spent", extra={"model": model})
                return model, first.result(), False
            logger.info(
                "hedging: the model has written nothing yet",
                extra={"model": model, "hedge": partner, "after_ms": round(hedge.after_s(model) * 1000)},
            )
            second = pool.submit(run, partner)
            ours, theirs = first.result(), second.result()
        if contest.winner == partner or (contest.winner is None and ours.failure and not theirs.failure):
            return partner, theirs, True
        if contest.winner == model or (theirs.failure and not ours.failure):
            return model, ours, True
        return partner, theirs, True  # both failed: the later model's failure decides what comes next

    def waiting_pays_for(model: str, after: str | None) -> Callable[[float], bool] | None:
        """Whether a Retry-After wait on ``model`` beats calling ``after`` (the next candidate) at once: by the
        predicted time to a recipe when both are measured (the wait plus ``model``'s, against ``after``'s);
        unmeasured, a wait within the back-off's own scale is a blip worth waiting out, a longer one a queue.
        Waiting is all there is when ``after``'s breaker refuses calls."""
        if after is None:
            return None

        def pays(wait_s: float) -> bool:
            breaker = breaker_for(after) if breaker_for else None
            if breaker is not None and breaker.refusing():
                return True
            own, alternative = (fastest.predicted(m) if fastest else None for m in (model, after))
            if own is not None and alternative is not None:
                return wait_s * 1000 + own < alternative
            return wait_s <= policy.max_backoff_s

        return pays

    hedged = hedge is None
    index = 0
    while index < len(models):
        model = models[index]
        if index and routed.failure is not None:
            left = budget.remaining_ms()
            if left < policy.min_attempt_ms:
                logger.info(
                    "no fallback: too little budget",
                    extra={"model": model, "remaining_ms": round(left), "min_attempt_ms": policy.min_attempt_ms},
                )
                break
        if fastest is not None and (why := fastest.skip(model, budget.remaining_ms(), index == len(models) - 1)):
            logger.info("model skipped: too slow for the time left", extra={"model": model, "reason": why})
            routed.calls.append(UpstreamCall(model=model, ms=0, outcome="skipped"))
            index += 1
            continue
        if not hedged and hedge is not None and index + 1 < len(models):
            hedged = True  # at most one hedge per job
            routed.model, attempts, both = race(model, models[index + 1], hedge)
            index += 2 if both else 1
        else:
            after = models[index + 1] if index + 1 < len(models) else None
            attempts = run_attempts(
                guarded_for(model),
                upstream=upstream,
                policy=policy,
                budget=budget,
                waiting_pays=waiting_pays_for(model, after),
            )
            routed.model = model
            index += 1
        routed.result, routed.failure = attempts.result, attempts.failure
        if attempts.failure is None or not attempts.failure.unhealthy:
            break
    routed.attempts = sum(1 for c in routed.calls if c.outcome not in (CircuitOpen.outcome, "skipped"))
    return routed
