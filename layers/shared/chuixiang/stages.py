"""What each state-machine Lambda does, independent of the Lambda plumbing.

The handlers in ``functions/*/app.py`` only parse the event, pass the remaining
execution time and serialise the result; everything here is plain Python that
tests can call directly.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import lru_cache
from typing import Any

import httpx
from aws_lambda_powertools.metrics import MetricUnit

from .clock import iso, now_utc, parse_iso
from .deadline import Budget
from .dish import InvalidDish, normalize_dish
from .errors import ErrorCode
from .image_stage import generate_image
from .images import ImageStore
from .jobs import JobStore
from .ladder_rules import state_timeout_seconds
from .models import (
    ImageEvent,
    ImageResult,
    RecipeEvent,
    RecipeResult,
    StageFailure,
    SubmitEvent,
    SubmitResult,
)
from .observability import logger, metrics
from .recipe_stage import generate_recipe
from .secrets import model_api_key
from .settings import Settings, get_settings


@lru_cache(maxsize=1)
def http_client() -> httpx.Client:
    """One client per container: keep-alive to the model survives warm invocations."""
    return httpx.Client(headers={"User-Agent": "chuixiang-backend/1.0"})


def job_store(settings: Settings | None = None) -> JobStore:
    return JobStore(settings or get_settings())


def submit(event: SubmitEvent, store: JobStore | None = None) -> SubmitResult:
    settings = get_settings()
    store = store or job_store(settings)
    timeouts = {
        "recipe": state_timeout_seconds(settings.recipe_function_timeout_s),
        "image": state_timeout_seconds(settings.image_function_timeout_s),
    }
    if store.get(event.jobId) is None:  # started without the API (console, replay)
        store.create(event.jobId, str(event.dish)[:200])
    try:
        dish = normalize_dish(event.dish)
    except InvalidDish as exc:
        failure = StageFailure(code=ErrorCode.INVALID_DISH, detail=str(exc), retryable=False)
        return SubmitResult(jobId=event.jobId, valid=False, error=failure.model_dump(), stateTimeouts=timeouts)
    started = parse_iso(event.executionStartTime) if event.executionStartTime else now_utc()
    deadline_at = iso(started + timedelta(seconds=settings.job_timeout_s))
    fields: dict[str, Any] = {"status": "RUNNING", "stage": "recipe", "dish": dish, "deadlineAt": deadline_at}
    cached = store.cached(dish)
    if cached:
        fields.update(stage="done", recipe=cached["recipe"])
        if cached.get("imageKey"):
            fields["imageKey"] = cached["imageKey"]
    store.update(event.jobId, **fields)
    metrics.add_metric(name="RecipeCacheHit" if cached else "RecipeCacheMiss", unit=MetricUnit.Count, value=1)
    return SubmitResult(jobId=event.jobId, dish=dish, valid=True, cached=bool(cached),
                        deadlineAt=deadline_at, stateTimeouts=timeouts)


def run_recipe(event: RecipeEvent, remaining_ms: Callable[[], float],
               store: JobStore | None = None) -> RecipeResult:
    """``remaining_ms`` is the context's clock: read only once the clients and the key are ready,
    so the budget is what is really left and the finishing margin only has to cover the writes."""
    settings = get_settings()
    store = store or job_store(settings)
    api_key = model_api_key(settings)
    budget = Budget(remaining_ms(), parse_iso(event.deadlineAt) if event.deadlineAt else None)
    outcome = generate_recipe(http_client(), settings, event.dish, budget, api_key)
    store.set_metrics(event.jobId, "recipe", outcome.metrics.model_dump(exclude_none=True))
    m = outcome.metrics
    metrics.add_metric(name="RecipeAttempts", unit=MetricUnit.Count, value=m.attempts)
    metrics.add_metric(name="RecipeTotalMs", unit=MetricUnit.Milliseconds, value=m.totalMs)
    if m.firstContentMs is not None:
        metrics.add_metric(name="RecipeFirstContentMs", unit=MetricUnit.Milliseconds, value=m.firstContentMs)
    if m.maxGapMs is not None:
        metrics.add_metric(name="RecipeMaxGapMs", unit=MetricUnit.Milliseconds, value=m.maxGapMs)
    if outcome.error is not None:
        err = outcome.error
        metrics.add_metric(name="RecipeFailed", unit=MetricUnit.Count, value=1)
        metrics.add_metadata(key="errorCode", value=err.code.value)
        logger.warning("recipe failed", extra={"code": err.code.value, "detail": err.detail})
        return RecipeResult(ok=False, error=StageFailure(code=err.code, detail=err.detail[:500],
                                                         retryable=err.retryable))
    assert outcome.recipe is not None
    recipe = outcome.recipe.model_dump(mode="json")
    store.update(event.jobId, recipe=recipe, stage="image")
    store.put_cache(event.dish, recipe=recipe)
    metrics.add_metric(name="RecipeSucceeded", unit=MetricUnit.Count, value=1)
    return RecipeResult(ok=True, imagePrompt=outcome.recipe.imagePrompt)


def run_image(event: ImageEvent, remaining_ms: Callable[[], float], store: JobStore | None = None,
              images: ImageStore | None = None) -> ImageResult:
    settings = get_settings()
    store = store or job_store(settings)
    images = images or ImageStore(settings)
    api_key = model_api_key(settings)
    budget = Budget(remaining_ms(), parse_iso(event.deadlineAt) if event.deadlineAt else None)
    outcome = generate_image(http_client(), settings, event.imagePrompt, budget, api_key)
    store.set_metrics(event.jobId, "image", outcome.metrics.model_dump())
    metrics.add_metric(name="ImageAttempts", unit=MetricUnit.Count, value=outcome.metrics.attempts)
    metrics.add_metric(name="ImageTotalMs", unit=MetricUnit.Milliseconds, value=outcome.metrics.totalMs)
    if outcome.error is not None:
        err = outcome.error
        metrics.add_metric(name="ImageFailed", unit=MetricUnit.Count, value=1)
        logger.warning("image failed", extra={"code": err.code.value, "detail": err.detail})
        store.update(event.jobId, imageError={"code": err.code.value, "detail": err.detail[:500]})
        return ImageResult(ok=False, error=StageFailure(code=err.code, detail=err.detail[:500],
                                                        retryable=err.retryable))
    assert outcome.image is not None
    key = f"images/{event.jobId}.{outcome.image.extension}"
    images.put(key, outcome.image.data, outcome.image.content_type)
    store.update(event.jobId, imageKey=key)
    if event.dish:
        store.put_cache(event.dish, imageKey=key)
    return ImageResult(ok=True, key=key)


def reconcile(job_id: str, status: str, store: JobStore | None = None) -> bool:
    """An execution ended as TIMED_OUT / ABORTED / FAILED: make sure its job is terminal."""
    store = store or job_store()
    code = ErrorCode.JOB_TIMED_OUT if status == "TIMED_OUT" else ErrorCode.INTERNAL
    changed = store.fail(job_id, code, f"execution {status}")
    logger.info("reconciled", extra={"jobId": job_id, "execution_status": status, "changed": changed})
    return changed
