"""The one retry rule, for both the recipe and the image call (the attempt loop is the router's).

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..observability import logger
from ..upstream.failures import UpstreamError


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int
    window_ms: float  #: a failure later than this after its request started is not retried
    min_attempt_ms: float  #: budget another attempt needs, after the back-off
    base_backoff_s: float = 0.5
    backoff_cap_factor: int = 4
    #: A call refused for the key's quota (429) is retried up to this many attempts, waiting what it was told, as
    #: long as the budget holds another attempt after the wait, whenever it came (0: the ordinary rule, one retry
    #: within the window). For the call a job cannot do without: the key being full is a wait, not a failure.
    quota_attempts: int = 0

    @property
    def max_backoff_s(self) -> float:
        """The longest back-off the rule itself would wait."""
        return self.base_backoff_s * self.backoff_cap_factor

    def backoff_s(self, attempt: int) -> float:
        """Full-jitter exponential back-off (AWS Architecture Blog): uniform in [0, base·2^n]."""
        cap = self.base_backoff_s * self.backoff_cap_factor
        return random.uniform(0, min(cap, self.base_backoff_s * 2 ** (attempt - 1)))  # nosec B311  # jitter


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
    if failure.quota and policy.quota_attempts:
        return _quota_retry(failure, attempt, remaining_ms, policy, waiting_pays)
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


def _quota_retry(
    failure: UpstreamError,
    attempt: int,
    remaining_ms: float,
    policy: RetryPolicy,
    waiting_pays: Callable[[float], bool] | None,
) -> RetryDecision:
    """The key was full: wait as it said (at least the back-off), as often as the budget still holds a whole
    attempt after the wait, unless the next model is predicted to finish sooner."""
    if attempt >= policy.quota_attempts:
        return RetryDecision(False, 0, f"the key refused {attempt} attempts")
    wait = max(policy.backoff_s(attempt), failure.retry_after_s or 0.0)
    if waiting_pays is not None and not waiting_pays(wait):
        return RetryDecision(False, 0, f"the key is full for {wait:g} s: the next model is predicted sooner")
    if remaining_ms - wait * 1000 < policy.min_attempt_ms:
        return RetryDecision(
            False, 0, f"the key is full: {remaining_ms:.0f} ms left cannot hold wait {wait:.2f} s + an attempt"
        )
    return RetryDecision(True, wait, "the key is full: waiting as it said")


def log_call(
    upstream: str,
    number: int,
    elapsed_ms: float,
    status: int | None,
    failure: UpstreamError | None,
    *,
    decision: str,
    fields: Mapping[str, Any],
) -> None:
    """One structured line per upstream call: what an operator greps for first."""
    logger.info(
        "upstream call",
        extra={
            "upstream": upstream,
            "attempt": number,
            "retry_count": number - 1,
            "duration_ms": round(elapsed_ms),
            "http_status": status,
            "timed_out": failure is not None and failure.kind == "timeout",
            "failure": str(failure) if failure else None,
            "decision": decision,
            **fields,
        },
    )
