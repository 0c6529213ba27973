"""The steps the state machine runs: one function per Lambda task, free of Lambda plumbing.

The handlers in ``functions/*/app.py`` only parse the event, pass the context's
clock and serialise the result; everything here is plain Python that tests can
call directly.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import lru_cache
from typing import Any

import httpx
from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from .clock import iso, now_utc, parse_iso
from .deadline import Budget
from .dish import InvalidDish, normalize_dish
from .errors import ErrorCode, StageError
from .generation.image import ImageLimits, generate_image
from .generation.progress import ProgressReporter
from .generation.recipe_call import RecipeLimits
from .generation.recipe_job import RecipeJob
from .generation.recipe_modes import write_recipe
from .generation.sections import whole_reservation
from .job_status import JobStage, JobStatus
from .limit_rules import state_timeout_seconds
from .observability import dimensioned_metric, logger, metrics
from .redaction import register_secret
from .resilience.key_loans import KeyQuotas
from .route_wiring import image_routes, recipe_routes
from .schemas import (
    ImageEvent,
    ImageResult,
    RecipeEvent,
    RecipeResult,
    SubmitEvent,
    SubmitResult,
)
from .settings import Settings, get_settings
from .stage_report import (
    count_job_end,
    record_recipe_outcome,
    record_stage_outcome,
    stage_failure,
)
from .stores.admission import Admission
from .stores.images import ImageStore, image_key
from .stores.job_item import JobItem
from .stores.job_times import JobTimes
from .stores.jobs import JobStore
from .stores.key_streams import DynamoKeyStore, KeyLender
from .stores.recipe_cache import RecipeCache
from .stores.secrets import model_api_key
from .timeouts import IMAGE_FUNCTION, PROGRESS_INTERVAL, RECIPE_FUNCTION, STATE_MACHINE
from .upstream.endpoint import ModelEndpoint


@lru_cache(maxsize=1)
def http_client() -> httpx.Client:
    """One client per container: keep-alive to the model survives warm invocations."""
    return httpx.Client(headers={"User-Agent": "chuixiang-backend/1.0"})


def warm_up(*, table: bool = True, model: bool = False, bucket: bool = False) -> None:
    """Create the clients a function needs at import, in Lambda's init phase: created in the first
    invocation instead, their model loading (tens to hundreds of ms of CPU) counts against its Timeout."""
    settings = get_settings()
    if table:
        JobStore(settings)
    if model:
        http_client()
        # The key too: one too short to redact safely fails the init, before any job could store it.
        register_secret(model_api_key(settings))
    if bucket:
        ImageStore(settings)


def job_store(settings: Settings | None = None) -> JobStore:
    return JobStore(settings or get_settings())


def _budget(remaining_ms: Callable[[], float], deadline_at: str | None) -> Budget:
    return Budget(remaining_ms(), parse_iso(deadline_at) if deadline_at else None)


def submit(event: SubmitEvent, store: JobStore | None = None) -> SubmitResult:
    settings = get_settings()
    store = store or job_store(settings)
    timeouts = {
        "recipe": state_timeout_seconds(RECIPE_FUNCTION.of(settings)),
        "image": state_timeout_seconds(IMAGE_FUNCTION.of(settings)),
    }
    item = store.get(event.jobId)
    if item is None:  # started without the API (console, replay)
        store.create(event.jobId, str(event.dish)[:200])
    slot = JobItem.model_validate(item).slot if item is not None else None
    try:
        dish = normalize_dish(event.dish)
    except InvalidDish as exc:
        failure = stage_failure(StageError(ErrorCode.INVALID_DISH, str(exc), retryable=False))
        return SubmitResult(
            jobId=event.jobId, valid=False, error=failure.model_dump(), stateTimeouts=timeouts, slot=slot
        )
    started = parse_iso(event.executionStartTime) if event.executionStartTime else now_utc()
    deadline_at = iso(started + timedelta(seconds=STATE_MACHINE.of(settings)))
    fields: dict[str, Any] = {
        "status": JobStatus.RUNNING,
        "stage": JobStage.RECIPE,
        "dish": dish,
        "deadlineAt": deadline_at,
    }
    cache = RecipeCache(settings, store.table)
    cached = cache.get(dish)
    if cached:
        fields.update(stage=JobStage.DONE, recipe=cached["recipe"])
        if cached.get("imageKey"):
            fields["imageKey"] = cached["imageKey"]
    store.update(event.jobId, **fields)
    metrics.add_metric(name="RecipeCacheHit" if cached else "RecipeCacheMiss", unit=MetricUnit.Count, value=1)
    if cached:
        count_job_end(store, event.jobId, None)  # the state machine finalizes it now
    return SubmitResult(
        jobId=event.jobId,
        dish=dish,
        valid=True,
        cached=bool(cached),
        deadlineAt=deadline_at,
        stateTimeouts=timeouts,
        slot=slot,
    )


def run_recipe(event: RecipeEvent, remaining_ms: Callable[[], float], store: JobStore | None = None) -> RecipeResult:
    """``remaining_ms`` is the context's clock: read only once the clients and the key are ready,
    so the budget is what is really left and the finishing margin only has to cover the writes."""
    settings = get_settings()
    store = store or job_store(settings)
    endpoint = ModelEndpoint(settings.model_base_url, settings.recipe_model, model_api_key(settings))
    limits = RecipeLimits.from_settings(settings)
    reporter = ProgressReporter(
        lambda progress, partial: store.record_progress(event.jobId, progress, partial),
        interval_s=PROGRESS_INTERVAL.of(settings) / 1000,
        expected_tokens=settings.recipe_expected_tokens,
    )
    routes = recipe_routes(settings, store)
    with reporter:
        budget = _budget(remaining_ms, event.deadlineAt)
        job = RecipeJob(http_client(), endpoint, limits, event.dish, budget, routes, reporter)
        outcome = write_recipe(
            job,
            setting=settings.recipe_sections,
            max_streams=settings.recipe_max_streams,
            lender=key_lender(settings, store, event.jobId, event.deadlineAt),
        )
    m = outcome.metrics
    failure = record_recipe_outcome(store, event.jobId, m, outcome.error, valid=outcome.result is not None)
    if failure is not None:
        count_job_end(store, event.jobId, failure.code)
        return RecipeResult(ok=False, error=failure)
    if outcome.result is None:  # generate_recipe returns a recipe or an error, never neither
        raise RuntimeError("recipe generation returned neither a recipe nor an error")
    recipe = outcome.result.model_dump(mode="json")
    degraded: dict[str, Any] = {"degraded": m.degraded} if m.degraded else {}
    store.update(
        event.jobId,
        recipe=recipe,
        stage=JobStage.IMAGE,
        progress=reporter.finished().model_dump(exclude_none=True),
        remove=("partial",),
        **degraded,
    )
    for section in m.degraded or ():  # served without it (RecipeSections=parallel): on the dashboard by section
        dimensioned_metric("RecipeSectionsDropped", MetricUnit.Count, 1, Section=section)
    if not m.degraded:  # one served without a part is not cached: the next cook of the dish writes it whole
        RecipeCache(settings, store.table).put(event.dish, recipe=recipe)
    metrics.add_metric(name="RecipeSucceeded", unit=MetricUnit.Count, value=1)
    return RecipeResult(ok=True, imagePrompt=outcome.result.imagePrompt)


def key_lender(settings: Settings, store: JobStore, job_id: str, deadline_at: str | None) -> KeyLender:
    """What the job may borrow of its key (the recipe model's, at its endpoint) beyond its own stream, until its
    deadline (a job that dies gives its loan back then)."""
    until = parse_iso(deadline_at) if deadline_at else now_utc() + timedelta(seconds=STATE_MACHINE.of(settings))
    quotas = KeyQuotas(
        streams=settings.recipe_key_streams,
        tokens_per_minute=settings.recipe_key_tokens_per_minute,
        jobs=settings.admission_jobs,
        whole_tokens=whole_reservation(settings.recipe_max_tokens).total,
    )
    store_ = DynamoKeyStore(store.table, settings.model_base_url, settings.recipe_model)
    return KeyLender(store_, quotas, job_id, until.timestamp())


def _seconds_since_start(settings: Settings, deadline_at: str) -> float:
    """How long the job has run: its start is its deadline less the state machine's timeout (the submit step
    set it so)."""
    started = parse_iso(deadline_at) - timedelta(seconds=STATE_MACHINE.of(settings))
    return (now_utc() - started).total_seconds()


def _record_job_time(store: JobStore, settings: Settings, deadline_at: str | None) -> None:
    """The job held its admission slot from its start until now, its last stage: what Retry-After is from."""
    if not deadline_at:
        return
    try:
        JobTimes(store.table).record(_seconds_since_start(settings, deadline_at))
    except (ClientError, BotoCoreError):
        logger.warning("job time not recorded", exc_info=True)  # Retry-After falls back to the typical job


def run_image(
    event: ImageEvent,
    remaining_ms: Callable[[], float],
    store: JobStore | None = None,
    images: ImageStore | None = None,
) -> ImageResult:
    settings = get_settings()
    store = store or job_store(settings)
    images = images or ImageStore(settings)
    endpoint = ModelEndpoint(settings.model_base_url, settings.image_model, model_api_key(settings))
    limits = ImageLimits.from_settings(settings)
    budget = _budget(remaining_ms, event.deadlineAt)
    outcome = generate_image(http_client(), endpoint, limits, event.imagePrompt, budget, image_routes(settings, store))
    failure = record_stage_outcome(store, event.jobId, JobStage.IMAGE, "Image", outcome.metrics, outcome.error)
    _record_job_time(store, settings, event.deadlineAt)
    count_job_end(store, event.jobId, None)  # SUCCEEDED, with or without its picture
    if failure is not None:
        store.update(event.jobId, imageError={"code": failure.code, "detail": failure.detail})
        return ImageResult(ok=False, error=failure)
    if outcome.result is None:  # generate_image returns a picture or an error, never neither
        raise RuntimeError("image generation returned neither a picture nor an error")
    metrics.add_metric(name="ImagesDrawn", unit=MetricUnit.Count, value=1)  # a picture the image model bills
    key = image_key(event.jobId, outcome.result.extension)
    images.put(key, outcome.result.data, outcome.result.content_type)
    store.update(event.jobId, imageKey=key)
    if event.dish:
        RecipeCache(settings, store.table).put(event.dish, image_key=key)
    return ImageResult(ok=True, key=key)


def reconcile(job_id: str, status: str, store: JobStore | None = None) -> bool:
    """An execution ended as TIMED_OUT / ABORTED / FAILED: make sure its job is terminal (``JOB_TIMED_OUT``,
    ``JOB_STOPPED``: an operator's stop, ``INTERNAL``) and its admission slot free."""
    store = store or job_store()
    code = {"TIMED_OUT": ErrorCode.JOB_TIMED_OUT, "ABORTED": ErrorCode.JOB_STOPPED}.get(status, ErrorCode.INTERNAL)
    changed = store.fail(job_id, code, f"execution {status}")
    item = store.read(job_id)
    # The workflow's FreeSlot states never ran: free the slot (or pass) now, not at its lease end.
    Admission(store.table, 0).release(job_id, item.slot if item is not None else None)
    logger.info("reconciled", extra={"jobId": job_id, "execution_status": status, "changed": changed})
    if changed:  # the state machine did not finish this job: an alarm (JobsReconciled) pages for it
        metrics.add_metric(name="JobsReconciled", unit=MetricUnit.Count, value=1)
    # Counted here unless a stage counted it: a crash (MarkFailed wrote it; no function counted it), a stop.
    count_job_end(store, job_id, code.value)
    return changed
