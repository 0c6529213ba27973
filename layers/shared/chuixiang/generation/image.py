"""Generate the dish's picture: one ``images/generations`` call, retried only early.

The picture is a nice-to-have: every failure here becomes ``imageError`` on a
job that still SUCCEEDS with its recipe. Retries follow the same rule as the
recipe (transient and early and time left); a timeout is never retried.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from ..deadline import Budget
from ..resilience.calls import CallContext, CallReport, Reply, Routes
from ..resilience.retry import RetryPolicy
from ..resilience.router import Router
from ..schemas import ImageMetrics
from ..settings import Settings
from ..timeouts import IMAGE_RETRY_WINDOW
from ..upstream.dialects import Dialect, dialect_for
from ..upstream.endpoint import ModelEndpoint
from ..upstream.images import GeneratedImage, request_image
from .stage import Generation, generate, stage_error

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


#: What an image generation returns: the picture or its error, and the measurements of the ``image`` stage.
ImageOutcome = Generation[GeneratedImage, ImageMetrics]


def image_payload(model: str, prompt: str, dialect: Dialect | None = None) -> dict[str, object]:
    """The image request in ``model``'s dialect: ``gpt-image-*`` refuses ``response_format`` (it always
    answers ``b64_json``); everyone else is asked for ``b64_json``, and a ``url`` answer is read too."""
    dialect = dialect or dialect_for(model)
    payload: dict[str, object] = {"model": model, "prompt": prompt, "n": 1, "size": "1024x1024"}
    if dialect.image_response_format != "none":
        payload["response_format"] = dialect.image_response_format
    return {**payload, **dialect.extra}


def generate_image(  # noqa: PLR0917 - the image stage's job value is the next step (as RecipeJob)
    client: httpx.Client,
    endpoint: ModelEndpoint,
    limits: ImageLimits,
    prompt: str,
    budget: Budget,
    routes: Routes | None = None,
) -> ImageOutcome:
    """One picture over ``routes`` (default: ``endpoint.model`` alone), retried by the image's own rule."""
    url = endpoint.url("/images/generations")
    headers = endpoint.headers()

    def call(context: CallContext) -> Reply[GeneratedImage]:
        payload = image_payload(context.model, prompt, dialect_for(context.model, limits.dialects))
        image = request_image(client, url, payload, headers, deadline=context.deadline, max_bytes=limits.max_bytes)
        return Reply(image, report=CallReport(status=200))

    budget_ms = budget.remaining_ms()
    router = Router(
        routes or Routes((endpoint.model,)),
        limits.retry_policy(budget_ms),
        "images.generations",
        lease_s=budget_ms / 1000,
    )
    routed = generate(router, call, budget)
    metrics = ImageMetrics(
        attempts=routed.attempts, totalMs=routed.total_ms, model=routed.model, calls=list(routed.calls)
    )
    return Generation(routed.result, stage_error("IMAGE", routed.failure), metrics)
