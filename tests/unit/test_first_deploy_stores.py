"""First-deploy fixes in the stores, on an in-process moto (``mock_aws``).

A module of its own: leaving ``mock_aws`` resets every moto backend of the process, and a module's shared local
cloud would live in the same process.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest


def test_a_jobs_image_url_is_signed_with_sigv4_and_stable_across_polls_until_near_expiry(table: Any) -> None:
    from chuixiang.settings import Settings
    from chuixiang.stores import images as images_module
    from chuixiang.stores.images import REUSE_WHILE_LEFT, ImageStore, forget_clients

    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="images")
    settings = Settings.model_validate(
        {"IMAGES_BUCKET": "images", "IMAGE_URL_TTL_SECONDS": "3600", "LOCAL_IMAGE_DIR": ""}
    )  # presigned, whatever an earlier test exported
    forget_clients()
    images_module._SIGNED.clear()
    images = ImageStore(settings)
    first, until = images.stable_url("images/job.png", now=1_000_000.0)
    assert until == 1_000_000 + 3600 and "X-Amz-Algorithm=AWS4-HMAC-SHA256" in first
    later = 1_000_000.0 + 3600 * (1 - REUSE_WHILE_LEFT) - 1  # a poll while a third of its life is left
    assert images.stable_url("images/job.png", now=later) == (first, until)
    near = 1_000_000.0 + 3600 * (1 - REUSE_WHILE_LEFT) + 1
    assert images.stable_url("images/job.png", now=near)[1] == int(near) + 3600  # signed anew
    forget_clients()


def test_an_image_url_is_valid_no_longer_than_the_credentials_that_signed_it(
    table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A presigned URL expires with the session token that signed it: its "valid until" says so."""
    from chuixiang.settings import Settings
    from chuixiang.stores import images as images_module
    from chuixiang.stores.images import ImageStore, forget_clients

    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="images")
    settings = Settings.model_validate(
        {"IMAGES_BUCKET": "images", "IMAGE_URL_TTL_SECONDS": "3600", "LOCAL_IMAGE_DIR": ""}
    )
    forget_clients()
    images_module._SIGNED.clear()
    monkeypatch.setattr(images_module, "_signer", lambda s3: ("ASIA-SESSION", 1_000_600.0))
    assert ImageStore(settings).stable_url("images/job.png", now=1_000_000.0)[1] == 1_000_600
    monkeypatch.setattr(images_module, "_signer", lambda s3: ("ASIA-SESSION", None))  # env credentials
    images_module._SIGNED.clear()
    assert ImageStore(settings).stable_url("images/job.png", now=1_000_000.0)[1] == 1_003_600
    forget_clients()


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
    from chuixiang.stores.images import ImageStore

    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    settings = Settings.model_validate({"IMAGES_BUCKET": "images", "LOCAL_IMAGE_DIR": ""})
    images_module._SIGNED.clear()
    _credentials(monkeypatch, "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ASIAFIRSTSANDBOX")
    forget_clients()
    first, _ = ImageStore(settings).stable_url("images/job.png", now=1_000_000.0)
    assert "ASIAFIRSTSANDBOX" in first
    assert ImageStore(settings).stable_url("images/job.png", now=1_000_001.0)[0] == first
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ASIASECONDSANDBOX")  # another sandbox, or a SnapStart restore
    forget_clients()
    second, _ = ImageStore(settings).stable_url("images/job.png", now=1_000_002.0)
    assert "ASIASECONDSANDBOX" in second and "ASIAFIRSTSANDBOX" not in second
    forget_clients()


def test_urls_are_signed_for_the_regional_virtual_hosted_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's default outside us-east-1 is the global host, where a new bucket answers 307 for hours."""
    from chuixiang.settings import Settings
    from chuixiang.stores.images import ImageStore, forget_clients

    _credentials(monkeypatch, "ap-northeast-1")
    forget_clients()
    settings = Settings.model_validate({"IMAGES_BUCKET": "images", "LOCAL_IMAGE_DIR": ""})
    url = ImageStore(settings).url("images/a.png")  # the container's client (no AWS_ENDPOINT_URL)
    assert url.startswith("https://images.s3.ap-northeast-1.amazonaws.com/images/a.png?"), url
    forget_clients()
