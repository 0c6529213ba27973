"""What both generations share: the router's call, one failure→code table, one result type.

A stage (``RECIPE`` or ``IMAGE``) names its error codes ``<STAGE>_<KIND>``; which
kind a failure is, is decided here once (:data:`FAILURE_KINDS`), so the recipe and
the image can never classify the same failure differently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from ..deadline import Budget
from ..errors import ErrorCode, StageError
from ..resilience.calls import CallContext, Reply, Routed
from ..resilience.router import Router
from ..upstream.dialects import report_refused_param
from ..upstream.failures import (
    Cancelled,
    CircuitOpen,
    ConnectFailed,
    ConnectionDropped,
    CredentialsEchoed,
    EmptyAnswer,
    InvalidAnswer,
    StatusError,
    StreamError,
    UpstreamError,
    UpstreamTimeout,
)

T = TypeVar("T")
M = TypeVar("M")
Stage = Literal["RECIPE", "IMAGE"]

#: What kind of failure each upstream failure is, for every stage: ``<STAGE>_<KIND>`` is its job error code.
#: The most specific class wins (``AnswerTooLarge`` is an ``InvalidAnswer``).
FAILURE_KINDS: dict[type[UpstreamError], str] = {
    UpstreamTimeout: "TIMEOUT",
    Cancelled: "TIMEOUT",  # the job's time ran out or it was stopped; nobody reads this code (the job moved on)
    # the upstream gave no answer (as opposed to a timeout or a bad answer)
    **dict.fromkeys(
        (ConnectFailed, ConnectionDropped, StatusError, StreamError, CircuitOpen, CredentialsEchoed), "UPSTREAM_ERROR"
    ),
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


def stage_error(stage: Stage, failure: UpstreamError | None) -> StageError | None:
    """The job's error for a stage that ended with ``failure`` (None: it did not fail). A request the model
    refused as such (4xx other than 429) fails again as it is: not retryable."""
    if failure is None:
        return None
    refused = isinstance(failure, StatusError) and failure.client_error
    return StageError(
        code_for(stage, failure),
        str(failure),
        retryable=False if refused else None,
        abandoned=isinstance(failure, Cancelled),
    )


@dataclass(frozen=True)
class Generation(Generic[T, M]):
    """What one stage's generation ended with: its result or its classified error, and its measurements."""

    result: T | None
    error: StageError | None
    metrics: M


def generate(router: Router, call: Callable[[CallContext], Reply[T]], budget: Budget) -> Routed[T]:
    """Route ``call`` with ``router``; a request a model refused for one of its parameters is reported
    (:func:`report_refused_param`) so ``ModelDialects`` can be fixed."""

    def reported(context: CallContext) -> Reply[T]:
        try:
            reply = call(context)
        except StatusError as failure:
            reply = Reply(failure=failure)
        if isinstance(reply.failure, StatusError):
            report_refused_param(reply.failure, context.model)
        return reply

    return router.route(reported, budget)
