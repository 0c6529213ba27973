"""What a stage tells the on-call once it ended: its metrics, its one log line, and a job's end counted once.

The steps (:mod:`chuixiang.steps`) call these after a generation ended; the saved Logs Insights queries and the
dashboard read what they write (``stage finished``, ``job ended``, ``JobsEnded``, the per-model figures).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from .clock import now_utc, parse_iso
from .errors import ErrorCode, StageError, clip_detail
from .generation.call_figures import tokens_per_second
from .job_status import JobStage, JobStatus, is_terminal
from .observability import dimensioned_metric, logger, metrics, model_metric
from .schemas import ImageMetrics, RecipeMetrics, StageFailure, UpstreamCall
from .stores.jobs import JobStore


def stage_failure(error: StageError) -> StageFailure:
    return StageFailure(code=error.code, detail=clip_detail(error.detail), retryable=error.retryable)


def call_metrics(prefix: str, calls: list[UpstreamCall], **dimensions: str) -> None:
    for c in calls:
        model_metric(f"{prefix}Calls", MetricUnit.Count, 1, c.model, Outcome=c.outcome, **dimensions)


def log_stage_finished(stage: str, model: str | None, total_ms: int, error: StageError | None, **figures: Any) -> None:
    """One line per stage and job, what the saved Logs Insights queries read (slowest jobs and where
    their time went, failures by code and model): ``recipeMs``/``imageMs`` so one ``stats`` sums each."""
    logger.info(
        "stage finished",
        extra={
            "stage": stage,
            "model": model,
            f"{stage}Model": model,  # so one ``stats`` over a job's two lines keeps the recipe's and the image's apart
            f"{stage}Ms": total_ms,
            "code": error.code.value if error else None,
            **figures,
        },
    )


def recipe_model_metrics(m: RecipeMetrics, valid: bool, **dimensions: str) -> None:
    """Per-model figures of one recipe generation, the same from real traffic and from the canary:
    for the model that answered its total, first content, writing rate and whether the recipe was valid
    (``RecipeValid`` averages to the valid rate). (Every call by outcome: :func:`call_metrics`, once.)
    ``dimensions``: the canary's figures carry ``Source=canary``, apart from what users got."""
    for c in m.calls:  # tokens are the model bill: every call's, and those that wrote no recipe
        if c.tokens:
            model_metric("RecipeTokensUsed", MetricUnit.Count, c.tokens, c.model, **dimensions)
            if c.outcome != "ok":
                model_metric("RecipeTokensWasted", MetricUnit.Count, c.tokens, c.model, **dimensions)
    for c in m.calls:  # first content that never came, counted at the time waited for it: it came no sooner
        if c.outcome == "first_content_timeout":  # (else the p90 alarm sees only the calls that were fast enough)
            model_metric("RecipeFirstContentMs", MetricUnit.Milliseconds, c.ms, c.model, **dimensions)
    if not (m.model and m.calls) or m.calls[-1].outcome == "breaker_open":
        return
    model_metric("RecipeTotalMs", MetricUnit.Milliseconds, m.totalMs, m.model, **dimensions)
    model_metric("RecipeValid", MetricUnit.Count, 1 if valid else 0, m.model, **dimensions)
    if m.firstContentMs is not None:
        model_metric("RecipeFirstContentMs", MetricUnit.Milliseconds, m.firstContentMs, m.model, **dimensions)
    rate = tokens_per_second(m)
    if rate is not None:
        model_metric("RecipeTokensPerSecond", MetricUnit.CountPerSecond, rate, m.model, **dimensions)


def record_stage_outcome(  # noqa: PLR0917 - the two stages' common tail
    store: JobStore,
    job_id: str,
    stage: JobStage,
    prefix: str,
    m: RecipeMetrics | ImageMetrics,
    error: StageError | None,
    **figures: Any,
) -> StageFailure | None:
    """What run_recipe and run_image do alike once their generation ended: keep its measurements on the job,
    emit its metrics and its one log line; the failure to return, if it failed."""
    store.set_metrics(job_id, stage, m.model_dump(exclude_none=True))
    call_metrics(prefix, m.calls)
    metrics.add_metric(name=f"{prefix}Attempts", unit=MetricUnit.Count, value=m.attempts)
    metrics.add_metric(name=f"{prefix}TotalMs", unit=MetricUnit.Milliseconds, value=m.totalMs)
    log_stage_finished(stage.value, m.model, m.totalMs, error, attempts=m.attempts, calls=len(m.calls), **figures)
    if error is None:
        return None
    if error.abandoned:  # a stop or a timeout ended the job first: counted once, as JOB_STOPPED/JOB_TIMED_OUT
        logger.info(f"{stage.value} abandoned: the job ended first", extra={"detail": error.detail})
        return stage_failure(error)
    metrics.add_metric(name=f"{prefix}Failed", unit=MetricUnit.Count, value=1)
    metrics.add_metadata(key="errorCode", value=error.code.value)
    logger.warning(f"{stage.value} failed", extra={"code": error.code.value, "detail": error.detail})
    return stage_failure(error)


def record_recipe_outcome(
    store: JobStore, job_id: str, m: RecipeMetrics, error: StageError | None, *, valid: bool
) -> StageFailure | None:
    """The recipe stage's figures once its generation ended (which mode ran, the per-model figures, first content
    and the longest gap), then :func:`record_stage_outcome`; the failure to return, if it failed."""
    if m.mode:  # which mode ran, and why in a word (a recipe begun in sections and written whole: why it was)
        basis = f"abandoned_{m.wholeAfter}" if m.wholeAfter else (m.modeBasis or "predicted")
        dimensioned_metric("RecipeMode", MetricUnit.Count, 1, Mode=m.mode, Basis=basis)
    recipe_model_metrics(m, valid=valid)
    if m.firstContentMs is not None:
        metrics.add_metric(name="RecipeFirstContentMs", unit=MetricUnit.Milliseconds, value=m.firstContentMs)
    for waited in (c.ms for c in m.calls if c.outcome == "first_content_timeout"):
        metrics.add_metric(name="RecipeFirstContentMs", unit=MetricUnit.Milliseconds, value=waited)
    if m.maxGapMs is not None:
        metrics.add_metric(name="RecipeMaxGapMs", unit=MetricUnit.Milliseconds, value=m.maxGapMs)
    if error is not None and error.abandoned:  # the stage the stops fall in (~90 s of a job's ~100): on the dashboard
        metrics.add_metric(name="RecipeAbandoned", unit=MetricUnit.Count, value=1)
    return record_stage_outcome(
        store,
        job_id,
        JobStage.RECIPE,
        "Recipe",
        m,
        error,
        firstContentMs=m.firstContentMs,
        maxGapMs=m.maxGapMs,
        boundBy=m.boundBy,
        degraded=m.degraded,
        mode=m.mode,
        modeReason=m.modeReason,
        modeBasis=m.modeBasis,
        mergeFailure=m.mergeFailure,
        wholeAfter=m.wholeAfter,
    )


def count_job_end(store: JobStore, job_id: str, code: str | None) -> None:
    """A job is ending: the golden signals, ``JobsEnded`` by ``Status`` and ``Code`` (the stable error codes,
    or ``OK``: few values) and ``JobLatencyMs``, from its first POST to now (what a user waited: a POST refused 429
    and retried with its Idempotency-Key counts from the refused one), exactly once per
    job whoever ends it (:meth:`~chuixiang.stores.jobs.JobStore.claim_end_count`): a stage that ends it, a cached
    dish's submit, or the reconciler after a crash, a stop or a timeout. A job already terminal is counted as it
    was ended (an operator's stop stays JOB_STOPPED, whatever the stage still running says after); one not yet
    terminal as its ending stage says (``code``; None: it succeeds, Finalize writes it next)."""
    try:
        item = store.claim_end_count(job_id)
    except (ClientError, BotoCoreError):
        logger.warning("job end not counted", exc_info=True)
        return
    if item is None:
        return  # counted by whoever ended it first
    if is_terminal(item.status):
        status = item.status
        code = (item.error_code if status == JobStatus.FAILED else None) or code
    else:
        status = JobStatus.FAILED if code else JobStatus.SUCCEEDED
    dimensioned_metric("JobsEnded", MetricUnit.Count, 1, Status=status.value, Code=code or "OK")
    waited_ms = None
    asked = item.askedAt or item.createdAt  # from the first POST, a refused one included
    if asked:
        waited_ms = max(0.0, (now_utc() - parse_iso(asked)).total_seconds() * 1000)
        dimensioned_metric("JobLatencyMs", MetricUnit.Milliseconds, waited_ms, Status=status.value)
    # The line the saved queries read (failures-by-code-and-model, slowest-jobs): one per job, whoever ended
    # it, with the model that wrote its recipe (not the image model; none when the recipe stage never reported).
    # A stop is the operator's, never a model's: none either, whether the reconciler counted it or the stage it
    # cut reported first (it writes its model before it counts; the reconciler marks the job, then counts).
    stopped = code == ErrorCode.JOB_STOPPED.value
    logger.info(
        "job ended",
        extra={
            "jobId": job_id,
            "status": status.value,
            "code": code or "OK",
            "waitedMs": None if waited_ms is None else int(waited_ms),
            "model": None if stopped else item.recipe_model,
        },
    )
