"""The one seam for model calls: a :class:`Router` sends a call over a model and its fallbacks.

A call is a function of a :class:`CallContext` (which model, its deadline, its cancellation, the race hook)
that returns a :class:`Reply`: a value or an :class:`UpstreamError`, and an immutable :class:`CallReport` of
what it measured. (A call may raise its ``UpstreamError`` instead: it then reports nothing.) The router owns
every rule around it, once:

- each model behind its shared circuit breaker: an open one is passed over at once (no request);
- same-model retries follow the retry rule (:func:`decide_retry`), timed on the upstream's own time;
- move to the next model only when the last failure says the model could not serve now
  (:attr:`UpstreamError.unhealthy`: 5xx, 429, refused or reset before any content, the first-content
  limit, an open breaker) and the budget left still holds ``min_attempt_ms``. Never after content has
  started, never for a bad answer: that is the model's quality, not its health;
- ``fastest`` skips a model that cannot finish in the time left; ``hedge`` races the next model against
  one slow to write;
- every upstream call is recorded once (:class:`UpstreamCall`), its measured health added once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..deadline import Budget
from ..observability import logger
from ..schemas import UpstreamCall
from ..tracing import span
from ..upstream.failures import Cancelled, CircuitOpen, UpstreamError
from ..upstream.watchdog import Cancellation
from .breaker import Permit
from .calls import (
    CallContext,
    CallRecord,
    Reply,
    Routed,
    Routes,
    no_race,
)
from .hedge import HedgeRace
from .retry import RetryPolicy, decide_retry, log_call

T = TypeVar("T")

__all__ = ["Router"]


@dataclass(frozen=True)
class Router:
    """The routes, and the rule of one stage: its retry policy, each attempt's own limit (None: only the
    budget), the half-open probe's lease, and the name its log lines carry."""

    routes: Routes
    policy: RetryPolicy
    upstream: str
    attempt_limit_ms: float | None = None
    lease_s: float = 0

    def route(self, call: Callable[[CallContext], Reply[T]], budget: Budget) -> Routed[T]:
        """Run ``call`` over the routes within ``budget``."""
        return _Routing(self, call, budget).run()


def _says_of_the_model(failure: UpstreamError | None, permit: Permit) -> bool:
    """Whether a call's outcome goes to its model's breaker. Not a call we closed (it says nothing of the model);
    not the key's quota (a 429: the provider refused the key, not the model, which a full key would otherwise
    open for every job of the stack), except as a probe's answer: the model is there to answer."""
    if isinstance(failure, Cancelled):
        return False
    return failure is None or not failure.quota or permit is Permit.PROBE


class _Routing(Generic[T]):
    """One routing run: the calls made so far (two threads append during a hedge race)."""

    def __init__(self, router: Router, call: Callable[[CallContext], Reply[T]], budget: Budget) -> None:
        self.router, self.routes, self.policy = router, router.routes, router.policy
        self.call, self.budget = call, budget
        self.calls: list[UpstreamCall] = []
        self.records: list[CallRecord] = []
        self._lock = threading.Lock()
        self.started = time.monotonic()

    def run(self) -> Routed[T]:
        models = self.routes.ordered()
        if self.routes.hedge is not None:
            self.routes.hedge.budget.earn()
        may_hedge = self.routes.hedge is not None
        reply: Reply[T] | None = None
        answered_by: str | None = None
        index = 0
        while index < len(models):
            model = models[index]
            partner = models[index + 1] if index + 1 < len(models) else None
            if reply is not None and not self._fallback_fits(model):
                break
            if self._skipped(model, last=partner is None):
                index += 1
                continue
            if may_hedge and partner is not None:
                may_hedge = False  # at most one hedge per job
                answered_by, reply, both = self._race(model, partner)
                index += 2 if both else 1
            else:
                answered_by, reply = model, self._attempts(model, waiting_pays=self._waiting_pays(model, partner))
                index += 1
            if reply.failure is None or not reply.failure.unhealthy:
                break
        return Routed(
            result=reply.value if reply else None,
            failure=reply.failure if reply else None,
            model=answered_by,
            calls=tuple(self.calls),
            total_ms=int((time.monotonic() - self.started) * 1000),
            records=tuple(self.records),
        )

    def _fallback_fits(self, model: str) -> bool:
        left = self.budget.remaining_ms()
        if left >= self.policy.min_attempt_ms:
            return True
        logger.info(
            "no fallback: too little budget",
            extra={"model": model, "remaining_ms": round(left), "min_attempt_ms": self.policy.min_attempt_ms},
        )
        return False

    def _skipped(self, model: str, last: bool) -> bool:
        fastest = self.routes.fastest
        why = fastest.skip(model, self.budget.remaining_ms(), last) if fastest else None
        if why is None:
            return False
        logger.info("model skipped: too slow for the time left", extra={"model": model, "reason": why})
        self._record(UpstreamCall(model=model, ms=0, outcome="skipped"))
        return True

    def _record(self, call: UpstreamCall) -> None:
        with self._lock:
            self.calls.append(call)

    def _attempts(
        self, model: str, race: HedgeRace | None = None, waiting_pays: Callable[[float], bool] | None = None
    ) -> Reply[T]:
        """Call ``model`` until it answers or :func:`decide_retry` says no; log every call once."""
        number = 0
        while True:
            number += 1
            reply, elapsed_ms, fields = self._call_once(model, number, race)
            failure = reply.failure
            if failure is None:
                log_call(
                    self.router.upstream, number, elapsed_ms, reply.report.status, None, decision="ok", fields=fields
                )
                return reply
            decision = decide_retry(
                failure,
                attempt=number,
                elapsed_ms=elapsed_ms,
                remaining_ms=self.budget.remaining_ms(),
                policy=self.policy,
                waiting_pays=waiting_pays,
            )
            status = failure.status or reply.report.status
            log_call(self.router.upstream, number, elapsed_ms, status, failure, decision=decision.reason, fields=fields)
            if not decision.retry:
                return reply
            time.sleep(decision.wait_s)

    def _call_once(self, model: str, number: int, race: HedgeRace | None) -> tuple[Reply[T], float, dict[str, Any]]:
        """One call behind ``model``'s breaker: (its reply, its upstream time in ms, its log fields)."""
        fields: dict[str, Any] = {"model": model}
        breaker = self.routes.breaker_for(model)
        permit = breaker.permit(self.router.lease_s) if breaker else Permit.CALL
        if permit is Permit.REJECT:
            self._record(UpstreamCall(model=model, ms=0, outcome=CircuitOpen.outcome))
            return Reply(failure=CircuitOpen(f"breaker open for {model}: no request sent")), 0.0, fields
        if permit is Permit.PROBE:
            fields["breaker_probe"] = True
        cancellation = Cancellation()
        if race is not None:
            race.enter(model, cancellation)
        # The retry window judges the upstream: the breaker's DynamoDB read and write are not in its time.
        started = time.monotonic()
        if race is not None:
            race.begin(model, started)
        deadline = self.budget.attempt(self.router.attempt_limit_ms)
        fields["deadline_bound_by"] = deadline.bound_by
        hook = (lambda: race.claim(model)) if race is not None else no_race
        with span(f"{self.router.upstream} {model}", model=model, attempt=number) as traced:
            reply = self._reply(CallContext(model, number, deadline, started, cancellation, hook))
            traced["outcome"] = "ok" if reply.failure is None else reply.failure.outcome
        elapsed_ms = (time.monotonic() - started) * 1000
        with self._lock:
            self.records.append(CallRecord(model, deadline, reply.report))
        self._account(model, reply, elapsed_ms, lost=race is not None and race.lost(model))
        if breaker is not None and _says_of_the_model(reply.failure, permit):
            breaker.record(permit, healthy=reply.failure is None or not reply.failure.unhealthy or reply.failure.quota)
        return reply, elapsed_ms, fields

    def _reply(self, context: CallContext) -> Reply[T]:
        try:
            return self.call(context)
        except UpstreamError as failure:
            return Reply(failure=failure)

    def _account(self, model: str, reply: Reply[T], elapsed_ms: float, lost: bool) -> None:
        """Record the call once, and add what it measured to the model's health."""
        report, failure = reply.report, reply.failure
        health = self.routes.health_for(model)
        if health is not None and report.observation is not None:
            health.observe(report.observation)
        outcome = "ok" if failure is None else failure.outcome
        if lost and isinstance(failure, Cancelled):
            outcome = "hedge_lost"
        self._record(
            UpstreamCall(
                model=model,
                ms=int(elapsed_ms),
                outcome=outcome,
                status=(failure.status if failure else None) or report.status,
                promptTokens=report.prompt_tokens,
                completionTokens=report.completion_tokens,
                cachedPromptTokens=report.cached_prompt_tokens,
            )
        )

    def _race(self, model: str, partner: str) -> tuple[str, Reply[T], bool]:
        """``model``'s attempts, and ``partner``'s too once ``model`` is slow to write: (the model that
        answered, its reply, whether the partner was called)."""
        hedge = self.routes.hedge
        assert hedge is not None  # nosec B101  # only called with a hedge
        contest = HedgeRace()
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="hedge") as pool:
            first: Future[Reply[T]] = pool.submit(self._attempts, model, contest)
            if not contest.silent_for(model, hedge.after_s(model), first.done):
                return model, first.result(), False
            if not hedge.budget.take():
                logger.info("no hedge: this endpoint's hedge budget is spent", extra={"model": model})
                return model, first.result(), False
            logger.info(
                "hedging: the model has written nothing yet",
                extra={"model": model, "hedge": partner, "after_ms": round(hedge.after_s(model) * 1000)},
            )
            second = pool.submit(self._attempts, partner, contest)
            ours, theirs = first.result(), second.result()
        if contest.winner == partner or (contest.winner is None and ours.failure and not theirs.failure):
            return partner, theirs, True
        if contest.winner == model or (theirs.failure and not ours.failure):
            return model, ours, True
        return partner, theirs, True  # both failed: the later model's failure decides what comes next

    def _waiting_pays(self, model: str, after: str | None) -> Callable[[float], bool] | None:
        """Whether a Retry-After wait on ``model`` beats calling ``after`` (the next candidate) at once: by the
        predicted time to a recipe when both are measured (the wait plus ``model``'s, against ``after``'s);
        unmeasured, a wait within the back-off's own scale is a blip worth waiting out, a longer one a queue.
        Waiting is all there is when ``after``'s breaker refuses calls."""
        if after is None:
            return None
        fastest, policy, breaker_for = self.routes.fastest, self.policy, self.routes.breaker_for

        def pays(wait_s: float) -> bool:
            breaker = breaker_for(after)
            if breaker is not None and breaker.refusing():
                return True
            own, alternative = (fastest.predicted(m) if fastest else None for m in (model, after))
            if own is not None and alternative is not None:
                return wait_s * 1000 + own < alternative
            return wait_s <= policy.max_backoff_s

        return pays
