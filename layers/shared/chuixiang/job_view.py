"""Reading a job for a poll: the deadline reconciled, the admission slot freed, the picture's URL signed,
and the public document rendered from the stored item."""

from __future__ import annotations

from .clock import iso, parse_iso
from .errors import ErrorCode, message_for, retryable_default
from .job_start import CALLER_NAMESPACES
from .job_status import JobStatus, is_terminal, past_deadline
from .polling import poll_after_ms
from .schemas import ErrorInfo, ImageErrorInfo, ImageRef, JobDocument, JobMetrics
from .settings import get_settings
from .stores.admission import Admission
from .stores.images import ImageStore
from .stores.job_item import JobItem
from .stores.jobs import JobStore
from .timeouts import PROGRESS_INTERVAL, STATE_MACHINE


def readable_by(owners: set[str], caller: str) -> bool:
    """A job is its owners' (who created or joined it); one made without a caller (no authorizer, or
    before owners were kept) is readable by whoever holds its id."""
    return not caller or not owners or caller in owners or _legacy_owner(caller) in owners


def _legacy_owner(caller: str) -> str | None:
    """How a ``sub`` caller was stored before caller ids had namespaces (the bare ``sub``), for the jobs kept
    from then; a bare ``sub`` that looks like another namespace's id is not one of them."""
    sub = caller.removeprefix("sub:")
    return sub if sub != caller and not sub.startswith(CALLER_NAMESPACES) else None


def load_job_document(job_id: str, caller: str = "") -> JobDocument | None:
    """Read a job for ``caller``; one found past its deadline and still not terminal is failed first. None:
    no such job, or not the caller's (the same answer: a job id says nothing about another caller)."""
    settings = get_settings()
    store = JobStore(settings)
    # Who may read it first, in a read of that alone: another caller's job and a missing one cost the same.
    owners = store.owners(job_id)
    if owners is None or not readable_by(owners, caller):
        return None
    item = store.read(job_id)
    if item is None:  # deleted between the two reads
        return None
    if past_deadline(item.status, item.deadlineAt, item.createdAt, STATE_MACHINE.of(settings)):
        store.fail(job_id, ErrorCode.JOB_TIMED_OUT, "reconciled by GET after deadlineAt")
        item = store.read(job_id) or item
    if is_terminal(item.status):
        # its admission slot (the client stops polling now)
        Admission(store.table, settings.admission_jobs).release(job_id, item.slot)
    url = ImageStore(settings).stable_url(item.imageKey)[0] if item.imageKey else None
    return render_job(item, url, PROGRESS_INTERVAL.of(settings))


def render_job(item: JobItem, image_url: str | None, progress_interval_ms: int) -> JobDocument:
    """The public job document (``GET /recipes/{jobId}``) from a stored item (internals dropped); its
    ``pollAfterMs`` in proportion to the stack's ``ProgressIntervalMs``."""
    error, image_error, key = item.error, item.imageError, item.imageKey
    failed = item.status == JobStatus.FAILED
    return JobDocument(
        jobId=item.jobId,
        dish=item.dish,
        status=item.status,
        stage=item.stage,
        recipe=item.recipe,
        image=ImageRef(url=image_url, key=key) if key and image_url else None,
        imageError=(
            ImageErrorInfo(code=image_error["code"], message=message_for(image_error["code"])) if image_error else None
        ),
        error=(
            ErrorInfo(
                code=error["code"],
                message=message_for(error["code"]),
                retryable=bool(error.get("retryable", retryable_default(error["code"]))),
            )
            if error
            else None
        ),
        createdAt=item.createdAt,
        updatedAt=iso(parse_iso(item.updatedAt or item.createdAt)),
        deadlineAt=item.deadlineAt,
        # A failed job shows its error, not how far it got; a written recipe supersedes the partial one.
        progress=item.progress if not failed else None,
        partial=item.partial if not failed and not item.recipe else None,
        degraded=item.degraded or None,
        pollAfterMs=poll_after_ms(item.status, item.stage, item.progress, progress_interval_ms),
        metrics=JobMetrics.model_validate(item.metrics),
    )
