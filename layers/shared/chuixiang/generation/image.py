"""Generate the dish's picture: one ``images/generations`` call, retried only early.

The picture is a nice-to-have: every failure here becomes ``imageError`` on a
job that still SUCCEEDS with its recipe. Retries follow the same rule as the
recipe (transient and early and time left); a timeout is never retried.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from ..deadline import Budget, Deadline
from ..errors import StageError
from ..models import ImageMetrics
from ..resilience.breaker import CircuitBreaker
from ..resilience.retry import Attempt, RetryPolicy
from ..settings import Settings
from ..timeouts import IMAGE_RETRY_WINDOW
from ..upstream.dialects import Dialect, dialect_for
from ..upstream.endpoint import ModelEndpoint
from ..upstream.images import GeneratedImage, request_image
from .stage import generate

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
        return cls(
            retry_window_ms=IMAGE_RETRY_WINDOW.of(settings),
            max_bytes=settings.image_max_bytes,
            dialects=settings.model_dialects,
        )

    def retry_policy(self, budget_ms: float) -> RetryPolicy:
        """The image has no limit of its own but the budget: a retry must leave half of what it started with."""
        return RetryPolicy(
            max_attempts=self.max_attempts,
            window_ms=self.retry_window_ms,
            min_attempt_ms=budget_ms * RETRY_BUDGET_FRACTION,
        )


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


def generate_image(
    client: httpx.Client,
    endpoint: ModelEndpoint,
    limits: ImageLimits,
    prompt: str,
    budget: Budget,
    *,
    fallbacks: tuple[str, ...] = (),
    breaker_for: Callable[[str], CircuitBreaker | None] | None = None,
) -> ImageOutcome:
    url = endpoint.url("/images/generations")
    headers = endpoint.headers()

    def call(model: str, attempt: Attempt, deadline: Deadline) -> GeneratedImage:
        payload = image_payload(model, prompt, dialect_for(model, limits.dialects))
        image = request_image(client, url, payload, headers, deadline=deadline, max_bytes=limits.max_bytes)
        attempt.status = 200
        return image

    budget_ms = budget.remaining_ms()
    done = generate(
        "IMAGE",
        (endpoint.model, *fallbacks),
        call,
        upstream="images.generations",
        policy=limits.retry_policy(budget_ms),
        budget=budget,
        attempt_limit_ms=None,
        breaker_for=breaker_for,
        lease_s=budget_ms / 1000,
    )
    return ImageOutcome(
        done.result,
        done.error,
        ImageMetrics(attempts=done.attempts, totalMs=done.total_ms, model=done.model, calls=done.calls),
    )
