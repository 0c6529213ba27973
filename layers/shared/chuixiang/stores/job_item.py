"""A job as the jobs table holds it, typed: what the readers of a job (a poll, the deadline rule, a job's end
counted once) read of it, instead of string keys into a dict. Written by :class:`~.jobs.JobStore`; its
encoding (numbers, string sets) undone by ``from_dynamo`` first. Fields the readers do not read are kept out:
the store writes them, and the job document (``schemas.JobDocument``) is the public view."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from ..job_status import JobStage, JobStatus


class JobItem(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    jobId: str
    dish: str
    status: JobStatus
    stage: JobStage = JobStage.SUBMIT
    createdAt: str
    #: When the user first asked for this job, when a POST with its Idempotency-Key was refused first (429).
    askedAt: str | None = None
    updatedAt: str | None = None
    deadlineAt: str | None = None
    #: The admission slot the job holds, if admission gave it one.
    slot: int | None = None
    #: Who may read it (who created or joined it); empty: whoever holds its id.
    owners: frozenset[str] = frozenset()
    recipe: dict[str, Any] | None = None
    partial: dict[str, Any] | None = None
    progress: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    imageError: dict[str, Any] | None = None
    imageKey: str | None = None
    metrics: dict[str, Any] = {}
    degraded: list[str] | None = None

    @property
    def error_code(self) -> str | None:
        return str(self.error["code"]) if self.error and self.error.get("code") else None

    @property
    def recipe_model(self) -> str | None:
        """The model that wrote the recipe (None: the recipe stage never reported)."""
        model = (self.metrics.get(JobStage.RECIPE.value) or {}).get("model")
        return str(model) if model else None
