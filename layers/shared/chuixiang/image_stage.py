"""The image stage: one OpenAI-compatible ``images/generations`` call, retried only early.

The picture is a nice-to-have: every failure here becomes ``imageError`` on a
job that still SUCCEEDS with its recipe. Retries follow the same rule as the
recipe (transient and early and time left), with refused connections, 5xx and
429 as the transient cases; a timeout is never retried.
"""

from __future__ import annotations

import base64
import binascii
import time
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from .deadline import Budget
from .errors import ErrorCode, StageError
from .models import ImageMetrics
from .observability import logger
from .settings import Settings
from .upstream import UpstreamFailure, Watchdog, decide_retry, send_post, status_failure

MAX_ATTEMPTS = 3
BASE_BACKOFF_S = 0.5
#: A retry must leave at least this share of the stage's starting budget.
RETRY_BUDGET_FRACTION = 0.5

SIGNATURES = {b"\x89PNG\r\n\x1a\n": ("image/png", "png"), b"\xff\xd8\xff": ("image/jpeg", "jpg")}


class _ImageDatum(BaseModel):
    b64_json: str


class ImagesResponse(BaseModel):
    data: list[_ImageDatum]


@dataclass
class GeneratedImage:
    data: bytes
    content_type: str
    extension: str


@dataclass
class ImageOutcome:
    image: GeneratedImage | None
    error: StageError | None
    metrics: ImageMetrics


_KIND_TO_CODE = {
    "timeout": ErrorCode.IMAGE_TIMEOUT,
    "connect": ErrorCode.IMAGE_UPSTREAM_ERROR,
    "reset": ErrorCode.IMAGE_UPSTREAM_ERROR,
    "status": ErrorCode.IMAGE_UPSTREAM_ERROR,
    "invalid": ErrorCode.IMAGE_INVALID,
    "cap": ErrorCode.IMAGE_INVALID,
}


def decode_image(body: bytes, max_bytes: int) -> GeneratedImage:
    try:
        datum = ImagesResponse.model_validate_json(body).data[0]
        data = base64.b64decode(datum.b64_json, validate=True)
    except (ValidationError, IndexError, binascii.Error, ValueError) as exc:
        raise UpstreamFailure("invalid", f"unexpected images response: {str(exc)[:200]}") from None
    if len(data) > max_bytes:
        raise UpstreamFailure("cap", f"image of {len(data)} bytes > {max_bytes}")
    for magic, (ctype, ext) in SIGNATURES.items():
        if data.startswith(magic):
            return GeneratedImage(data, ctype, ext)
    raise UpstreamFailure("invalid", f"bytes are not PNG/JPEG: {data[:8]!r}")


def post_within(
    client: httpx.Client, url: str, payload: dict[str, Any], headers: dict[str, str],
    remaining_s: float, max_bytes: int,
) -> bytes:
    """POST and read the whole answer before ``remaining_s`` runs out (watchdog-enforced)."""
    if remaining_s <= 0:
        raise UpstreamFailure("timeout", "no time left")
    watchdog = Watchdog(remaining_s)
    timeout = httpx.Timeout(remaining_s, connect=min(remaining_s, 10.0))
    try:
        response = send_post(client, url, payload, headers, timeout, watchdog,
                             lambda: UpstreamFailure("timeout", f"no answer within {remaining_s:.1f} s"))
        try:
            body = b""
            try:
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > max_bytes * 2:  # base64 is 4/3 of the bytes, plus JSON
                        raise UpstreamFailure("cap", f"answer over {max_bytes * 2} bytes")
            except (httpx.TimeoutException, httpx.RemoteProtocolError, httpx.ReadError) as exc:
                if watchdog.fired.is_set() or isinstance(exc, httpx.TimeoutException):
                    raise UpstreamFailure("timeout", f"answer not read within {remaining_s:.1f} s") from None
                raise UpstreamFailure("reset", f"dropped mid-answer: {exc}") from None
            if watchdog.fired.is_set():
                raise UpstreamFailure("timeout", f"answer not read within {remaining_s:.1f} s")
            if response.status_code != 200:
                raise status_failure(response, body)
            return body
        finally:
            response.close()
    finally:
        watchdog.cancel()


def generate_image(
    client: httpx.Client, settings: Settings, prompt: str, budget: Budget, api_key: str | None
) -> ImageOutcome:
    url = settings.model_base_url.rstrip("/") + "/images/generations"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    payload = {"model": settings.image_model, "prompt": prompt, "n": 1, "size": "1024x1024",
               "response_format": "b64_json"}
    metrics = ImageMetrics()
    started = time.monotonic()
    initial_ms = budget.remaining_ms()
    attempt = 0
    while True:
        attempt += 1
        attempt_start = time.monotonic()
        status: int | None = 200
        try:
            body = post_within(client, url, payload, headers, budget.remaining_ms() / 1000,
                               settings.image_max_bytes)
            image = decode_image(body, settings.image_max_bytes)
        except UpstreamFailure as failure:
            elapsed_ms = (time.monotonic() - attempt_start) * 1000
            decision = decide_retry(
                failure, attempt=attempt, max_attempts=MAX_ATTEMPTS, elapsed_ms=elapsed_ms,
                window_ms=settings.image_retry_window_ms, remaining_ms=budget.remaining_ms(),
                needed_ms=initial_ms * RETRY_BUDGET_FRACTION, base_backoff_s=BASE_BACKOFF_S,
            )
            _log(attempt, elapsed_ms, failure.status, failure, decision.reason)
            metrics.attempts, metrics.totalMs = attempt, int((time.monotonic() - started) * 1000)
            if decision.retry:
                time.sleep(decision.wait_s)
                continue
            return ImageOutcome(None, StageError(_KIND_TO_CODE[failure.kind], str(failure)), metrics)
        _log(attempt, (time.monotonic() - attempt_start) * 1000, status, None, "ok")
        metrics.attempts, metrics.totalMs = attempt, int((time.monotonic() - started) * 1000)
        return ImageOutcome(image, None, metrics)


def _log(attempt: int, elapsed_ms: float, status: int | None, failure: UpstreamFailure | None,
         decision: str) -> None:
    logger.info("upstream call", extra={
        "upstream": "images.generations", "attempt": attempt, "retry_count": attempt - 1,
        "duration_ms": round(elapsed_ms), "http_status": status,
        "timed_out": bool(failure and failure.kind == "timeout"),
        "failure": str(failure) if failure else None, "decision": decision,
    })
