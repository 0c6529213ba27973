"""Reading a job for a poll: the deadline reconciled, the admission slot freed, the picture's URL signed."""

from __future__ import annotations

from typing import Any

from .errors import ErrorCode
from .job_status import is_terminal
from .models import JobDocument
from .settings import get_settings
from .stores.admission import Admission
from .stores.images import ImageStore
from .stores.jobs import JobStore, past_deadline, render
from .timeouts import STATE_MACHINE


def readable_by(item: dict[str, Any], caller: str) -> bool:
    """A job is its owners' (who created or joined it); one made without a caller (no authorizer, or
    before owners were kept) is readable by whoever holds its id."""
    owners = item.get("owners")
    return not caller or not owners or caller in owners


def load_job_document(job_id: str, caller: str = "") -> JobDocument | None:
    """Read a job for ``caller``; one found past its deadline and still not terminal is failed first. None:
    no such job, or not the caller's (the same answer: a job id says nothing about another caller)."""
    settings = get_settings()
    store = JobStore(settings)
    item = store.get(job_id)
    if item is None or not readable_by(item, caller):
        return None
    if past_deadline(item, STATE_MACHINE.of(settings)):
        store.fail(job_id, ErrorCode.JOB_TIMED_OUT, "reconciled by GET after deadlineAt")
        item = store.get(job_id) or item
    if is_terminal(item.get("status")):
        # its admission slot (the client stops polling now)
        Admission(store.table, settings.max_jobs_in_flight).release(job_id, item.get("slot"))
    url = ImageStore(settings).stable_url(item["imageKey"])[0] if item.get("imageKey") else None
    return render(item, url)
