"""Image storage: the PNG goes to a private bucket; callers get a short-lived URL.

In AWS the URL is presigned (the bucket is never public). In local runs
(``LOCAL_IMAGE_DIR`` set) the object is exported to a file and the URL is its
path, so a person can open the picture.
"""

from __future__ import annotations

import time
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

from ..settings import Settings, aws_endpoint

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

#: A cached URL is handed out again while more than this share of its lifetime is left: clients can
#: cache the picture by URL for most of an hour, and nobody gets one about to expire.
REUSE_WHILE_LEFT = 1 / 3


def image_key(job_id: str, extension: str) -> str:
    """Where a job's picture lives (the bucket lifecycle rule and IAM statements use the prefix)."""
    return f"images/{job_id}.{extension}"


@lru_cache(maxsize=4)
def _s3(endpoint: str | None) -> S3Client:
    # SigV4 always (never the legacy SigV2 some old client configurations pick for presigned URLs).
    return boto3.client("s3", endpoint_url=endpoint, config=Config(signature_version="s3v4"))


class ImageStore:
    def __init__(self, settings: Settings, s3: S3Client | None = None) -> None:
        self.settings = settings
        self.s3 = s3 or _s3(aws_endpoint())

    def put(self, key: str, data: bytes, content_type: str) -> None:
        self.s3.put_object(
            Bucket=self.settings.images_bucket, Key=key, Body=data, ContentType=content_type
        )

    def stable_url(self, key: str, cached: str | None, cached_until: int | None,
                   now: float | None = None) -> tuple[str, int, bool]:
        """``(url, valid until, fresh)``: the job's cached URL while it has more than a third of its life
        left, else a new one (``fresh``: the caller keeps it on the job), so polls see one URL, not a new
        signature each time."""
        now = time.time() if now is None else now
        ttl = self.settings.image_url_ttl_s
        if cached and cached_until and cached_until - now > ttl * REUSE_WHILE_LEFT:
            return cached, int(cached_until), False
        return self.url(key), int(now) + ttl, True

    def url(self, key: str) -> str:
        if self.settings.local_image_dir:
            target = Path(self.settings.local_image_dir) / Path(key).name
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                body = self.s3.get_object(Bucket=self.settings.images_bucket, Key=key)["Body"]
                target.write_bytes(body.read())
            return str(target.resolve())
        url: str = self.s3.generate_presigned_url(
            "get_object",
            Params={"Bucket": self.settings.images_bucket, "Key": key},
            ExpiresIn=self.settings.image_url_ttl_s,
        )
        return url
