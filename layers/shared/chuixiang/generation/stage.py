"""The skeleton both generations share: route over the models, one deadline per attempt, one failure→code table.

A stage (``RECIPE`` or ``IMAGE``) names its error codes ``<STAGE>_<KIND>``; which
kind a failure is, is decided here once (:data:`FAILURE_KINDS`), so the recipe and
the image can never classify the same failure differently.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from ..deadline import Budget, Deadline
from ..errors import ErrorCode, StageError
from ..models import UpstreamCall
from ..resilience.breaker import CircuitBreaker
from ..resilience.health import HealthStore
from ..resilience.retry import Attempt, RetryPolicy
from ..resilience.routing import FastestFirst, Hedge, call_models
from ..upstream.dialects import report_refused_param
from ..upstream.failures import (
    Cancelled,
    CircuitOpen,
    ConnectFailed,
    ConnectionDropped,
    EmptyAnswer,
    InvalidAnswer,
    StatusError,
    StreamError,
    UpstreamError,
    UpstreamTimeout,
)

T = TypeVar("T")
Stage = Literal["RECIPE", "IMAGE"]

#: What kind of failure each upstream failure is, for every stage: ``<STAGE>_<KIND>`` is its job error code.
#: The most specific class wins (``AnswerTooLarge`` is an ``InvalidAnswer``).
FAILURE_KINDS: dict[type[UpstreamError], str] = {
    UpstreamTimeout: "TIMEOUT",
    Cancelled: "TIMEOUT",  # the job's time ran out or it was stopped; nobody reads this code (the job moved on)
    # the upstream gave no answer (as opposed to a timeout or a bad answer)
    **dict.fromkeys((ConnectFailed, ConnectionDropped, StatusError, StreamError, CircuitOpen), "UPSTREAM_ERROR"),
    InvalidAnswer: "INVALID",
    EmptyAnswer: "EMPTY",
}


def code_for(stage: Stage, failure: UpstreamError) -> ErrorCode:
    """The job error code of ``failure`` in ``stage`` (a stage without the kind's code: ``<STAGE>_INVALID``)."""
    kind = next((FAILURE_KINDS[cls] for cls in type(failure).__mro__ if cls in FAILURE_KINDS), None)
    if kind is None:
        raise KeyError(f"no code for {type(failure).__name__}")
    try:
        return ErrorCode(f"{stage}_{kind}")
    except ValueError:
        return ErrorCode(f"{stage}_INVALID")


@dataclass
class Generated(Generic[T]):
    """What one stage's generation ended with: a result or the classified error, and every call made."""

    result: T | None = None
    error: StageError | None = None
    model: str | None = None  #: the model that answered (or the last one tried)
    attempts: int = 0
    calls: list[UpstreamCall] = field(default_factory=list)
    total_ms: int = 0


def generate(
    stage: Stage,
    models: Sequence[str],
    call: Callable[[str, Attempt, Deadline], T],
    *,
    upstream: str,
    policy: RetryPolicy,
    budget: Budget,
    attempt_limit_ms: float | None,
    breaker_for: Callable[[str], CircuitBreaker | None] | None,
    lease_s: float,
    health_for: Callable[[str], HealthStore] | None = None,
    fastest: FastestFirst | None = None,
    hedge: Hedge | None = None,
) -> Generated[T]:
    """Run ``call(model, attempt, deadline)`` over ``models`` (fallbacks in order) under the retry rule.

    The one place an attempt's deadline is cut from the budget: ``attempt_limit_ms`` (the stage's own limit;
    None: only the budget) and whatever the Lambda and the job have left, whichever ends first."""
    started = time.monotonic()

    def attempt(model: str, attempt: Attempt) -> T:
        deadline = budget.attempt(attempt_limit_ms)
        attempt.fields["deadline_bound_by"] = deadline.bound_by
        try:
            return call(model, attempt, deadline)
        except StatusError as failure:
            report_refused_param(failure, model)
            raise

    routed = call_models(
        fastest.order(models) if fastest else models,
        attempt,
        upstream=upstream,
        policy=policy,
        budget=budget,
        breaker_for=breaker_for,
        lease_s=lease_s,
        health_for=health_for,
        fastest=fastest,
        hedge=hedge,
    )
    out: Generated[T] = Generated(
        result=routed.result,
        model=routed.model,
        attempts=routed.attempts,
        calls=list(routed.calls),
        total_ms=int((time.monotonic() - started) * 1000),
    )
    failure = routed.failure
    if failure is not None:
        refused = isinstance(failure, StatusError) and failure.client_error  # the same request fails again
        out.error = StageError(code_for(stage, failure), str(failure), retryable=False if refused else None)
    return out
