"""A job's status and stage (the only place their values are spelled in Python), and the deadline rule.

``status`` is what the client switches on; ``stage`` says which step of the
state machine the job is in (``done`` once nothing is left to run). The ASL
spells the same values in its DynamoDB updates, since JSON cannot import them.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

from .clock import now_utc, parse_iso


class JobStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


def is_terminal(status: str | None) -> bool:
    """For a status read from a document or an item (a plain string)."""
    return status in {s.value for s in TERMINAL}


class JobStage(StrEnum):
    SUBMIT = "submit"
    RECIPE = "recipe"
    IMAGE = "image"
    DONE = "done"


TERMINAL: frozenset[JobStatus] = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED})


def past_deadline(
    status: str | None, deadline_at: str | None, created_at: str | None, job_timeout_s: int | None
) -> bool:
    """The deadline rule: a non-terminal job whose time is up: its ``deadlineAt``, or, never started, its
    creation + ``job_timeout_s`` (None: a job never started is never past it)."""
    if is_terminal(status):
        return False
    if deadline_at:
        deadline = parse_iso(deadline_at)
    elif job_timeout_s is not None and created_at:
        deadline = parse_iso(created_at) + timedelta(seconds=job_timeout_s)
    else:
        return False
    return now_utc() > deadline
