"""The one retry rule and the one attempt loop, for both the recipe and the image call.

A failure is retried only when it is *transient* (the upstream plainly did not do
the work: refused, reset before any byte, 5xx, 429), *early* (within the retry
window of the request's start: the breaker's read before it and write after it are not the
upstream's time), *before any content*, and when the budget left
still holds another attempt after the back-off. A timeout is never retried: an
attempt that used its whole limit leaves no room for another, and a late failure
retried is how a 90 s wait becomes a gateway timeout.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..deadline import Budget
from ..observability import logger
from ..upstream.failures import UpstreamError
from ..upstream.transport import Cancellation
from .health import Observation

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int
    window_ms: float  #: a failure later than this after its request started is not retried
    min_attempt_ms: float  #: budget another attempt needs, after the back-off
    base_backoff_s: float = 0.5
    backoff_cap_factor: int = 4

    @property
    def max_backoff_s(self) -> float:
        """The longest back-off the rule itself would wait."""
        return self.base_backoff_s * self.backoff_cap_factor

    def backoff_s(self, attempt: int) -> float:
        """Full-jitter exponential back-off (AWS Architecture Blog): uniform in [0, base·2^n]."""
        cap = self.base_backoff_s * self.backoff_cap_factor
        return random.uniform(0, min(cap, self.base_backoff_s * 2 ** (attempt - 1)))  # nosec B311 - jitter


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    wait_s: float
    reason: str


def decide_retry(
    failure: UpstreamError,
    *,
    attempt: int,
    elapsed_ms: float,
    remaining_ms: float,
    policy: RetryPolicy,
    waiting_pays: Callable[[float], bool] | None = None,
) -> RetryDecision:
    """Retry only early, transient failures before any content, when time allows. ``waiting_pays(s)``:
    whether waiting ``s`` seconds for this model beats moving on to the next (None: there is no next)."""
    if not failure.transient:
        return RetryDecision(False, 0, f"{failure.kind} is not transient")
    if failure.content_started:
        return RetryDecision(False, 0, "content had already started")
    if elapsed_ms > policy.window_ms:
        return RetryDecision(False, 0, f"failed after {elapsed_ms:.0f} ms > window {policy.window_ms:.0f} ms")
    if attempt >= policy.max_attempts:
        return RetryDecision(False, 0, f"attempt {attempt} of {policy.max_attempts}")
    wait = policy.backoff_s(attempt)
    if failure.retry_after_s is not None:  # the upstream said when: worth waiting only if it beats the next model
        wait = max(wait, failure.retry_after_s)
        if waiting_pays is not None and not waiting_pays(wait):
            return RetryDecision(
                False,
                0,
                f"Retry-After {failure.retry_after_s:g} s: the next model is predicted to finish sooner; it, at once",
            )
    if remaining_ms - wait * 1000 < policy.min_attempt_ms:
        said = f"Retry-After {failure.retry_after_s:g} s: " if failure.retry_after_s is not None else ""
        return RetryDecision(
            False,
            0,
            f"{said}{remaining_ms:.0f} ms left cannot hold wait {wait:.2f} s + "
            f"{policy.min_attempt_ms:.0f} ms; the next model, if any, at once",
        )
    return RetryDecision(True, wait, "early transient failure")


@dataclass
class Attempt:
    """One upstream call; the call sets ``status`` and any extra log ``fields`` it knows."""

    number: int
    started: float = field(default_factory=time.monotonic)
    status: int | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    ended: float | None = None  #: when the upstream answered; None: still running (or never set)
    #: What the call will be billed (the provider's count, else estimated); None: nothing reached the model.
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: What this call measured of the model (its health), recorded once the call has ended.
    observation: Observation | None = None
    #: Closes this call (a lost hedge race, a job nobody reads any more); the call must pass it on.
    cancellation: Cancellation = field(default_factory=Cancellation)
    #: Called by the call when the model first writes; False: another call won the race, stop (see routing).
    first_text: Callable[[], bool] = lambda: True

    def begin(self) -> None:
        """The upstream call starts now: what came before (a breaker's read) is not the upstream's time."""
        self.started = time.monotonic()

    def end(self) -> None:
        """The upstream call ended now: what comes after (the breaker's write) is not the upstream's time."""
        self.ended = time.monotonic()

    def elapsed_ms(self) -> float:
        return ((self.ended if self.ended is not None else time.monotonic()) - self.started) * 1000


@dataclass
class Attempts(Generic[T]):
    """What the loop ended with: a result or the last failure, and how many calls it took."""

    result: T | None
    failure: UpstreamError | None
    count: int


def run_attempts(
    call: Callable[[Attempt], T],
    *,
    upstream: str,
    policy: RetryPolicy,
    budget: Budget,
    waiting_pays: Callable[[float], bool] | None = None,
) -> Attempts[T]:
    """Call until success or until :func:`decide_retry` says no; log every call once."""
    number = 0
    while True:
        number += 1
        attempt = Attempt(number)
        try:
            result = call(attempt)
        except UpstreamError as failure:
            elapsed_ms = attempt.elapsed_ms()
            decision = decide_retry(
                failure,
                attempt=number,
                elapsed_ms=elapsed_ms,
                remaining_ms=budget.remaining_ms(),
                policy=policy,
                waiting_pays=waiting_pays,
            )
            log_call(upstream, attempt, elapsed_ms, failure.status or attempt.status, failure, decision.reason)
            if decision.retry:
                time.sleep(decision.wait_s)
                continue
            return Attempts(None, failure, number)
        log_call(upstream, attempt, attempt.elapsed_ms(), attempt.status, None, "ok")
        return Attempts(result, None, number)


def log_call(
    upstream: str, attempt: Attempt, elapsed_ms: float, status: int | None, failure: UpstreamError | None, decision: str
) -> None:
    """One structured line per upstream call: what an operator greps for first."""
    logger.info(
        "upstream call",
        extra={
            "upstream": upstream,
            "attempt": attempt.number,
            "retry_count": attempt.number - 1,
            "duration_ms": round(elapsed_ms),
            "http_status": status,
            "timed_out": failure is not None and failure.kind == "timeout",
            "failure": str(failure) if failure else None,
            "decision": decision,
            **attempt.fields,
        },
    )
