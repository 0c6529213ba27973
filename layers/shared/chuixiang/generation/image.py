"""Generate the dish's picture: one ``images/generations`` call, retried only early.

The picture is a nice-to-have: every failure here becomes ``imageError`` on a
job that still SUCCEEDS with its recipe. Retries follow the same rule as the
recipe (transient and early and time left); a timeout is never retried.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from ..deadline import Budget
from ..errors import ErrorCode, StageError
from ..models import ImageMetrics
from ..settings import Settings
from ..stores.breaker import CircuitBreaker
from ..timeouts import IMAGE_RETRY_WINDOW
from ..upstream.dialects import Dialect, dialect_for, report_refused_param
from ..upstream.endpoint import ModelEndpoint
from ..upstream.failures import (
    NO_ANSWER,
    InvalidAnswer,
    StatusError,
    UpstreamError,
    UpstreamTimeout,
    code_for,
)
from ..upstream.images import GeneratedImage, request_image
from ..upstream.retry import Attempt, RetryPolicy
from ..upstream.routing import call_models

#: The image stage's error code for each kind of upstream failure.
CODES: dict[type[UpstreamError], ErrorCode] = {
    UpstreamTimeout: ErrorCode.IMAGE_TIMEOUT,
    **dict.fromkeys(NO_ANSWER, ErrorCode.IMAGE_UPSTREAM_ERROR),
    InvalidAnswer: ErrorCode.IMAGE_INVALID,
}
#: A retry must leave at least this share of the stage's starting budget.
RETRY_BUDGET_FRACTION = 0.5


@dataclass(frozen=True)
class ImageLimits:
    """Everything that bounds one image generation, built once from the settings."""

    retry_window_ms: float
    max_bytes: int
    max_attempts: int = 3
    dialects: str = ""  #: the ``ModelDialects`` map (JSON)

    @classmethod
    def from_settings(cls, settings: Settings) -> ImageLimits:
        return cls(retry_window_ms=IMAGE_RETRY_WINDOW.of(settings), max_bytes=settings.image_max_bytes,
                   dialects=settings.model_dialects)

    def retry_policy(self, budget_ms: float) -> RetryPolicy:
        """The image has no limit of its own but the budget: a retry must leave half of what it started with."""
        return RetryPolicy(max_attempts=self.max_attempts, window_ms=self.retry_window_ms,
                           min_attempt_ms=budget_ms * RETRY_BUDGET_FRACTION)


@dataclass
class ImageOutcome:
    image: GeneratedImage | None
    error: StageError | None
    metrics: ImageMetrics = field(default_factory=ImageMetrics)


def image_payload(model: str, prompt: str, dialect: Dialect | None = None) -> dict[str, object]:
    """The image request in ``model``'s dialect: ``gpt-image-*`` refuses ``response_format`` (it always
    answers ``b64_json``); everyone else is asked for ``b64_json``, and a ``url`` answer is read too."""
    dialect = dialect or dialect_for(model)
    payload: dict[str, object] = {"model": model, "prompt": prompt, "n": 1, "size": "1024x1024"}
    if dialect.image_response_format != "none":
        payload["response_format"] = dialect.image_response_format
    return {**payload, **dialect.extra}


def generate_image(client: httpx.Client, endpoint: ModelEndpoint, limits: ImageLimits, prompt: str,
                   budget: Budget, *, fallbacks: tuple[str, ...] = (),
                   breaker_for: Callable[[str], CircuitBreaker | None] | None = None) -> ImageOutcome:
    url = endpoint.url("/images/generations")
    headers = endpoint.headers()
    outcome = ImageOutcome(None, None)
    started = time.monotonic()

    def call(model: str, attempt: Attempt) -> GeneratedImage:
        payload = image_payload(model, prompt, dialect_for(model, limits.dialects))
        try:
            image = request_image(client, url, payload, headers, deadline=budget.attempt(None),
                                  max_bytes=limits.max_bytes)
        except StatusError as failure:
            report_refused_param(failure, model)
            raise
        attempt.status = 200
        return image

    budget_ms = budget.remaining_ms()
    routed = call_models((endpoint.model, *fallbacks), call, upstream="images.generations",
                         policy=limits.retry_policy(budget_ms), budget=budget, breaker_for=breaker_for,
                         lease_s=budget_ms / 1000)
    outcome.image = routed.result
    outcome.metrics = ImageMetrics(attempts=routed.attempts, totalMs=int((time.monotonic() - started) * 1000),
                                   model=routed.model,
                                   calls=list(routed.calls))
    if routed.failure is not None:
        outcome.error = StageError(code_for(routed.failure, CODES), str(routed.failure))
    return outcome
