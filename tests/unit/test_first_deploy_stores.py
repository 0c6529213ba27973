"""First-deploy fixes in the stores, on an in-process moto (``mock_aws``).

Apart from ``test_first_deploy``: leaving ``mock_aws`` resets every moto backend of the process, and the
local cloud that module shares between its tests lives in the same process.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest


def test_a_jobs_image_url_is_signed_with_sigv4_and_stable_across_polls_until_near_expiry(table: Any) -> None:
    from chuixiang.settings import Settings
    from chuixiang.stores.images import REUSE_WHILE_LEFT, ImageStore, _s3

    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="images")
    settings = Settings.model_validate({"IMAGES_BUCKET": "images", "IMAGE_URL_TTL_SECONDS": "3600",
                                        "LOCAL_IMAGE_DIR": ""})  # presigned, whatever an earlier test exported
    _s3.cache_clear()
    images = ImageStore(settings)
    first, until, fresh = images.stable_url("images/job.png", None, None, now=1_000_000.0)
    assert fresh and until == 1_000_000 + 3600 and "X-Amz-Algorithm=AWS4-HMAC-SHA256" in first
    later = 1_000_000.0 + 3600 * (1 - REUSE_WHILE_LEFT) - 1  # a poll while a third of its life is left
    assert images.stable_url("images/job.png", first, until, now=later) == (first, until, False)
    near = 1_000_000.0 + 3600 * (1 - REUSE_WHILE_LEFT) + 1
    renewed, renewed_until, fresh = images.stable_url("images/job.png", first, until, now=near)
    assert fresh and renewed_until == int(near) + 3600
    _s3.cache_clear()


def test_polls_of_a_finished_job_see_one_image_url(monkeypatch: pytest.MonkeyPatch) -> None:
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

    from chuixiang import api as api_module
    from chuixiang.job_status import JobStatus
    from chuixiang.settings import get_settings
    from chuixiang.stores.images import _s3
    from chuixiang.stores.jobs import JobStore
    from chuixiang_local.gateway.api_client import http_event

    from ..api_on_moto import api_on_moto

    monkeypatch.setenv("LOCAL_IMAGE_DIR", "")  # the presigned path, as in AWS
    _s3.cache_clear()
    with api_on_moto(max_jobs=20, name="stable-url") as app:
        assert isinstance(app, APIGatewayHttpResolver)
        job_id = "0badc0de-0000-4000-8000-00000000000b"
        store = JobStore(get_settings())
        store.create(job_id, "番茄炒蛋")
        store.update(job_id, status=JobStatus.SUCCEEDED, stage="done", imageKey=f"images/{job_id}.png")

        def poll() -> tuple[str, str]:
            answer = api_module.handle(app, http_event("GET", f"/recipes/{job_id}"), None)
            doc = json.loads(answer["body"])
            return doc["image"]["url"], doc["updatedAt"]

        first, updated = poll()
        item = store.get(job_id)
        assert item is not None and item["imageUrl"] == first and "X-Amz-Signature=" in first
        # The next poll hands out what the job holds (not a new signature): shown by planting one.
        planted = first + "&planted=1"
        store.remember_image_url(job_id, planted, int(item["imageUrlUntil"]))
        second, updated_again = poll()
        assert second == planted
        assert updated == updated_again  # remembering the URL is not a change of the job
    _s3.cache_clear()


def test_retry_after_says_when_a_slot_is_expected_to_free(table: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Full: Retry-After is when the slot taken longest ago should free (a typical job's length after it was
    taken), not the 30 s cap every time (the leases run to each job's deadline, minutes away)."""
    from datetime import UTC, datetime, timedelta

    from chuixiang.settings import Settings
    from chuixiang.stores import jobs
    from chuixiang.stores.jobs import EXPECTED_JOB_S, JobStore

    store = JobStore(Settings.model_validate({"JOBS_TABLE": "jobs"}), table)
    t0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    clock = [t0]
    monkeypatch.setattr(jobs, "now_utc", lambda: clock[0])
    deadline = int((t0 + timedelta(seconds=300)).timestamp())
    assert store.admit("job-a", deadline, limit=2)[0] is not None
    clock[0] = t0 + timedelta(seconds=50)
    assert store.admit("job-b", deadline, limit=2)[0] is not None
    clock[0] = t0 + timedelta(seconds=EXPECTED_JOB_S - 20)
    slot, retry_after = store.admit("job-c", deadline, limit=2)
    assert slot is None and retry_after == 20  # job-a, taken at t0, is due at t0 + EXPECTED_JOB_S
    clock[0] = t0 + timedelta(seconds=EXPECTED_JOB_S + 10)  # overdue: any moment now
    assert store.admit("job-d", deadline, limit=2) == (None, 1)
