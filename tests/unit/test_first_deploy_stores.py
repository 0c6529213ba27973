"""First-deploy fixes in the stores, on an in-process moto (``mock_aws``).

Apart from ``test_first_deploy``: leaving ``mock_aws`` resets every moto backend of the process, and the
local cloud that module shares between its tests lives in the same process.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest


def test_a_jobs_image_url_is_signed_with_sigv4_and_stable_across_polls_until_near_expiry(table: Any) -> None:
    from chuixiang.settings import Settings
    from chuixiang.stores import images as images_module
    from chuixiang.stores.images import REUSE_WHILE_LEFT, ImageStore, _s3

    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="images")
    settings = Settings.model_validate(
        {"IMAGES_BUCKET": "images", "IMAGE_URL_TTL_SECONDS": "3600", "LOCAL_IMAGE_DIR": ""}
    )  # presigned, whatever an earlier test exported
    _s3.cache_clear()
    images_module._SIGNED.clear()
    images = ImageStore(settings)
    first, until = images.stable_url("images/job.png", now=1_000_000.0)
    assert until == 1_000_000 + 3600 and "X-Amz-Algorithm=AWS4-HMAC-SHA256" in first
    later = 1_000_000.0 + 3600 * (1 - REUSE_WHILE_LEFT) - 1  # a poll while a third of its life is left
    assert images.stable_url("images/job.png", now=later) == (first, until)
    near = 1_000_000.0 + 3600 * (1 - REUSE_WHILE_LEFT) + 1
    assert images.stable_url("images/job.png", now=near)[1] == int(near) + 3600  # signed anew
    _s3.cache_clear()


def _credentials(monkeypatch: pytest.MonkeyPatch, region: str) -> None:
    """A sandbox's environment: its credentials and region (presigning calls nothing)."""
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "ASIATEST"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
        ("AWS_SESSION_TOKEN", "token"),
        ("AWS_DEFAULT_REGION", region),
        ("AWS_REGION", region),
    ):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)


def test_a_url_is_reused_only_under_the_credentials_that_signed_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A URL signed with temporary credentials dies with them: new credentials (a new sandbox, a SnapStart
    restore) sign anew, and nothing is kept on the job for another sandbox to hand out."""
    from chuixiang.api import forget_clients
    from chuixiang.settings import Settings
    from chuixiang.stores import images as images_module
    from chuixiang.stores.images import ImageStore, _s3

    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    settings = Settings.model_validate({"IMAGES_BUCKET": "images", "LOCAL_IMAGE_DIR": ""})
    images_module._SIGNED.clear()
    _credentials(monkeypatch, "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ASIAFIRSTSANDBOX")
    _s3.cache_clear()
    first, _ = ImageStore(settings).stable_url("images/job.png", now=1_000_000.0)
    assert "ASIAFIRSTSANDBOX" in first
    assert ImageStore(settings).stable_url("images/job.png", now=1_000_001.0)[0] == first
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ASIASECONDSANDBOX")  # another sandbox, or a SnapStart restore
    forget_clients()
    second, _ = ImageStore(settings).stable_url("images/job.png", now=1_000_002.0)
    assert "ASIASECONDSANDBOX" in second and "ASIAFIRSTSANDBOX" not in second
    _s3.cache_clear()


def test_urls_are_signed_for_the_regional_virtual_hosted_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's default outside us-east-1 is the global host, where a new bucket answers 307 for hours."""
    from chuixiang.settings import Settings
    from chuixiang.stores.images import ImageStore, _s3

    _credentials(monkeypatch, "ap-northeast-1")
    _s3.cache_clear()
    settings = Settings.model_validate({"IMAGES_BUCKET": "images", "LOCAL_IMAGE_DIR": ""})
    url = ImageStore(settings, _s3(None)).url("images/a.png")
    assert url.startswith("https://images.s3.ap-northeast-1.amazonaws.com/images/a.png?"), url
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


def test_retry_after_comes_from_the_jobs_measured_this_hour(table: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs took ~15 s each: a full admission says so (when the oldest slot is due by that measure), not the
    typical two minutes the review saw as a 30 s cap every time."""
    from datetime import UTC, datetime, timedelta

    from chuixiang.settings import Settings
    from chuixiang.stores import jobs
    from chuixiang.stores.jobs import JOB_TIME_MIN_SAMPLES, JobStore

    store = JobStore(Settings.model_validate({"JOBS_TABLE": "jobs"}), table)
    t0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    clock = [t0]
    monkeypatch.setattr(jobs, "now_utc", lambda: clock[0])
    jobs._JOB_TIME.clear()
    for _ in range(JOB_TIME_MIN_SAMPLES):
        store.record_job_seconds(15.2)
    assert store.expected_job_s() == pytest.approx(15.2)
    deadline = int((t0 + timedelta(seconds=300)).timestamp())
    assert store.admit("job-a", deadline, limit=1)[0] is not None
    clock[0] = t0 + timedelta(seconds=5)
    slot, retry_after = store.admit("job-b", deadline, limit=1)
    assert slot is None and retry_after == pytest.approx(10.2, abs=1)  # job-a, taken at t0, due at ~t0 + 15 s
    jobs._JOB_TIME.clear()
