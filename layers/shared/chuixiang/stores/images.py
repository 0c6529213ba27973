"""Image storage: the PNG goes to a private bucket; callers get a short-lived URL.

In AWS the URL is presigned (the bucket is never public). In local runs
(``LOCAL_IMAGE_DIR`` set) the object is exported to a file and the URL is its
path, so a person can open the picture.
"""

from __future__ import annotations

import hashlib
import time
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from ..settings import Settings, aws_endpoint
from ..tracing import trace_aws_calls

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

#: A URL is handed out again while more than this share of its lifetime is left: clients can cache the
#: picture by URL for most of its life, and nobody gets one about to expire.
REUSE_WHILE_LEFT = 1 / 3

#: The URLs this sandbox signed: (object key, the access key that signed) -> (url, valid until). Kept in the
#: sandbox, never on the job: a URL signed with temporary credentials dies with them ("the URL expires when
#: the token expires", S3's presigned URL guide), and another sandbox's credentials are not ours to vouch for.
_SIGNED: dict[tuple[str, str], tuple[str, int]] = {}


def image_key(job_id: str, extension: str) -> str:
    """Where a job's picture lives (the bucket lifecycle rule and IAM statements use the prefix). Named by a
    one-way digest of the job id, the same on a retry of the stage: a cached recipe hands the key to later
    jobs of other callers, and it must not name the job it was drawn for."""
    return f"images/{hashlib.sha256(job_id.encode()).hexdigest()[:32]}.{extension}"


@lru_cache(maxsize=4)
def _s3(endpoint: str | None) -> S3Client:
    """SigV4 always (never the legacy SigV2 some old client configurations pick for presigned URLs), and on AWS
    the regional virtual-hosted host: by default botocore signs for the global ``bucket.s3.amazonaws.com``
    outside us-east-1, where a new bucket answers 307 for its first hours and the redirected request fails."""
    config = (
        Config(signature_version="s3v4")
        if endpoint
        else Config(signature_version="s3v4", s3={"addressing_style": "virtual"})
    )
    return trace_aws_calls(boto3.client("s3", endpoint_url=endpoint, config=config))


def _signer(s3: S3Client) -> tuple[str, float | None]:
    """The access key id the client signs with now (a SnapStart restore or a new sandbox brings new ones), and
    when those credentials expire if botocore knows it: S3 (*Sharing objects with presigned URLs*) "If you
    created a presigned URL using a temporary token, then the URL expires when the token expires, even if the URL
    was created with a later expiration time"."""
    signer: Any = getattr(s3, "_request_signer")  # noqa: B009 - botocore has no public accessor for it
    credentials = signer._credentials
    if credentials is None:
        return "", None
    expiry = getattr(credentials, "_expiry_time", None)  # RefreshableCredentials; env credentials say nothing
    return str(credentials.get_frozen_credentials().access_key), expiry.timestamp() if expiry else None


def forget_clients() -> None:
    """Build the S3 client again on first use (after a SnapStart restore: the snapshot's is stale)."""
    _s3.cache_clear()


class ImageStore:
    def __init__(self, settings: Settings, s3: S3Client | None = None) -> None:
        self.settings = settings
        self.s3 = s3 or _s3(aws_endpoint())

    def put(self, key: str, data: bytes, content_type: str) -> None:
        self.s3.put_object(Bucket=self.settings.images_bucket, Key=key, Body=data, ContentType=content_type)

    def stable_url(self, key: str, now: float | None = None) -> tuple[str, int]:
        """``(url, valid until)``: the one this sandbox signed with its current credentials while it has more
        than a third of its life left, else a new one, so polls see one URL, not a new signature each time."""
        now = time.time() if now is None else now
        ttl = self.settings.image_url_ttl_s
        if self.settings.local_image_dir:
            return self.url(key), int(now) + ttl
        signer, expires = _signer(self.s3)
        cached = _SIGNED.get((key, signer))
        if cached and cached[1] - now > ttl * REUSE_WHILE_LEFT:
            return cached
        signed = self.url(key), int(min(now + ttl, expires or now + ttl))  # a URL dies with its session
        _SIGNED[(key, signer)] = signed
        if len(_SIGNED) > 1024:  # a warm sandbox serves many jobs: keep the newest
            del _SIGNED[next(iter(_SIGNED))]
        return signed

    def url(self, key: str) -> str:
        if self.settings.local_image_dir:
            target = Path(self.settings.local_image_dir) / Path(key).name
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                body = self.s3.get_object(Bucket=self.settings.images_bucket, Key=key)["Body"]
                target.write_bytes(body.read())
            base = self.settings.local_image_base_url.rstrip("/")
            return f"{base}/{target.name}" if base else str(target.resolve())
        url: str = self.s3.generate_presigned_url(
            "get_object",
            Params={"Bucket": self.settings.images_bucket, "Key": key},
            ExpiresIn=self.settings.image_url_ttl_s,
        )
        return url
