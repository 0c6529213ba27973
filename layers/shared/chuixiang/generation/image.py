"""Generate the dish's picture: one ``images/generations`` call, retried only early.

The picture is a nice-to-have: every failure here becomes ``imageError`` on a
job that still SUCCEEDS with its recipe. Retries follow the same rule as the
recipe (transient and early and time left); a timeout is never retried.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import httpx

from ..deadline import Budget
from ..errors import ErrorCode, StageError
from ..models import ImageMetrics
from ..settings import Settings
from ..timeouts import IMAGE_RETRY_WINDOW
from ..upstream.endpoint import ModelEndpoint
from ..upstream.failures import (
    ConnectFailed,
    ConnectionDropped,
    InvalidAnswer,
    StatusError,
    StreamError,
    UpstreamError,
    UpstreamTimeout,
    code_for,
)
from ..upstream.images import GeneratedImage, request_image
from ..upstream.retry import Attempt, RetryPolicy, run_attempts

#: The image stage's error code for each kind of upstream failure.
CODES: dict[type[UpstreamError], ErrorCode] = {
    UpstreamTimeout: ErrorCode.IMAGE_TIMEOUT,
    ConnectFailed: ErrorCode.IMAGE_UPSTREAM_ERROR,
    ConnectionDropped: ErrorCode.IMAGE_UPSTREAM_ERROR,
    StatusError: ErrorCode.IMAGE_UPSTREAM_ERROR,
    StreamError: ErrorCode.IMAGE_UPSTREAM_ERROR,
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

    @classmethod
    def from_settings(cls, settings: Settings) -> ImageLimits:
        return cls(retry_window_ms=IMAGE_RETRY_WINDOW.of(settings), max_bytes=settings.image_max_bytes)

    def retry_policy(self, budget_ms: float) -> RetryPolicy:
        """The image has no limit of its own but the budget: a retry must leave half of what it started with."""
        return RetryPolicy(max_attempts=self.max_attempts, window_ms=self.retry_window_ms,
                           min_attempt_ms=budget_ms * RETRY_BUDGET_FRACTION)


@dataclass
class ImageOutcome:
    image: GeneratedImage | None
    error: StageError | None
    metrics: ImageMetrics = field(default_factory=ImageMetrics)


def image_payload(model: str, prompt: str) -> dict[str, object]:
    return {"model": model, "prompt": prompt, "n": 1, "size": "1024x1024", "response_format": "b64_json"}


def generate_image(client: httpx.Client, endpoint: ModelEndpoint, limits: ImageLimits, prompt: str,
                   budget: Budget) -> ImageOutcome:
    url = endpoint.url("/images/generations")
    headers = endpoint.headers()
    payload = image_payload(endpoint.model, prompt)
    outcome = ImageOutcome(None, None)
    started = time.monotonic()

    def call(attempt: Attempt) -> GeneratedImage:
        try:
            image = request_image(client, url, payload, headers, deadline=budget.attempt(None),
                                  max_bytes=limits.max_bytes)
            attempt.status = 200
            return image
        finally:
            outcome.metrics.attempts = attempt.number
            outcome.metrics.totalMs = int((time.monotonic() - started) * 1000)

    attempts = run_attempts(call, upstream="images.generations", policy=limits.retry_policy(budget.remaining_ms()),
                            budget=budget)
    outcome.image = attempts.result
    if attempts.failure is not None:
        outcome.error = StageError(code_for(attempts.failure, CODES), str(attempts.failure))
    return outcome
