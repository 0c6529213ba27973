"""A job's status and stage: the only place their values are spelled in Python.

``status`` is what the client switches on; ``stage`` says which step of the
state machine the job is in (``done`` once nothing is left to run). The ASL
spells the same values in its DynamoDB updates, since JSON cannot import them.
"""

from __future__ import annotations

from enum import StrEnum


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
