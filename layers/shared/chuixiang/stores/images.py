"""Image storage: the PNG goes to a private bucket; callers get a short-lived URL.

In AWS the URL is presigned (the bucket is never public). In local runs
(``LOCAL_IMAGE_DIR`` set) the object is exported to a file and the URL is its
path, so a person can open the picture.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import boto3

from ..settings import Settings


def image_key(job_id: str, extension: str) -> str:
    """Where a job's picture lives (the bucket lifecycle rule and IAM statements use the prefix)."""
    return f"images/{job_id}.{extension}"


@lru_cache(maxsize=4)
def _s3(endpoint: str | None) -> Any:
    return boto3.client("s3", endpoint_url=endpoint)


class ImageStore:
    def __init__(self, settings: Settings, s3: Any | None = None) -> None:
        self.settings = settings
        self.s3 = s3 or _s3(os.environ.get("AWS_ENDPOINT_URL"))

    def put(self, key: str, data: bytes, content_type: str) -> None:
        self.s3.put_object(
            Bucket=self.settings.images_bucket, Key=key, Body=data, ContentType=content_type
        )

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
