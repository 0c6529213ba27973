"""One OpenAI-compatible ``images/generations`` call, read inside the deadline.

The answer holds the picture as ``b64_json`` or as a ``url`` to fetch (``dall-e-*`` by default, many
gateways always): both are read, the URL downloaded within the same deadline and size cap. A URL is
fetched only over HTTPS or from the endpoint's own origin (a local model), and never with our key:
it came from an upstream answer, so it must not be a way to reach the function's own network or to
send the key elsewhere.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ValidationError

from ..deadline import Deadline
from ..redaction import redact, redact_bytes
from .failures import AnswerTooLarge, InvalidAnswer
from .image_metadata import picture_only
from .transport import GuardedPost, GuardedRequest

SIGNATURES = {
    b"\x89PNG\r\n\x1a\n": ("image/png", "png"),
    b"\xff\xd8\xff": ("image/jpeg", "jpg"),
    b"RIFF": ("image/webp", "webp"),
}


class ImageDatum(BaseModel):
    b64_json: str | None = None
    url: str | None = None


class ImagesResponse(BaseModel):
    data: list[ImageDatum]


@dataclass(frozen=True)
class GeneratedImage:
    data: bytes
    content_type: str
    extension: str


def first_datum(body: bytes) -> ImageDatum:
    """The first picture of an images answer; an answer with neither field is invalid."""
    try:
        datum = ImagesResponse.model_validate_json(body).data[0]
    except ValidationError as exc:
        first = exc.errors()[0]
        why = f"{first['msg']} at {'.'.join(map(str, first['loc'])) or 'the top'}"
        raise InvalidAnswer(f"unexpected images response ({why}): {repr(redact_bytes(body[:4096]))[:200]}") from exc
    except IndexError as exc:
        raise InvalidAnswer(f"images response has no picture: {repr(redact_bytes(body[:4096]))[:200]}") from exc
    if not datum.b64_json and not datum.url:
        raise InvalidAnswer("images response has neither b64_json nor url")
    return datum


def decode_b64(b64: str, max_bytes: int) -> GeneratedImage:
    try:
        data = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidAnswer(f"b64_json is not base64: {str(exc)[:200]}") from exc
    return sniff(data, max_bytes)


def sniff(data: bytes, max_bytes: int) -> GeneratedImage:
    """The picture's type from its first bytes (never from a header an upstream chose), without the text an
    upstream put in it (:mod:`~chuixiang.upstream.image_metadata`)."""
    if len(data) > max_bytes:
        raise AnswerTooLarge(f"image of {len(data)} bytes > {max_bytes}")
    for magic, (ctype, ext) in SIGNATURES.items():
        if data.startswith(magic) and (ext != "webp" or data[8:12] == b"WEBP"):
            return GeneratedImage(picture_only(data, ext), ctype, ext)
    raise InvalidAnswer(f"bytes are not PNG/JPEG/WebP: {data[:8]!r}")


def may_fetch(image_url: str, endpoint_url: str) -> bool:
    """HTTPS anywhere, or the endpoint's own scheme, host and port (a model on loopback)."""
    target, endpoint = urlsplit(image_url), urlsplit(endpoint_url)
    if target.scheme == "https" and target.hostname:
        return True
    return (target.scheme, target.hostname, target.port) == (endpoint.scheme, endpoint.hostname, endpoint.port)


def request_image(
    client: httpx.Client,
    url: str,
    payload: dict[str, Any],
    headers: dict[str, str],
    *,
    deadline: Deadline,
    max_bytes: int,
) -> GeneratedImage:
    """POST and read the whole answer before the deadline (it may be silent until then); fetch a URL answer
    within what is left of it."""
    remaining_s = deadline.remaining_ms() / 1000
    # base64 is 4/3 of the bytes, plus the JSON around it
    request = GuardedRequest(url, payload, headers, deadline, read_timeout_s=remaining_s, max_bytes=max_bytes * 2)
    with GuardedPost(client, request) as call:
        if call.status != 200:
            raise call.status_error()
        body = b"".join(call.chunks())
    datum = first_datum(body)
    if datum.b64_json:
        return decode_b64(datum.b64_json, max_bytes)
    assert datum.url is not None  # nosec B101  # first_datum checked it
    return download_image(client, datum.url, endpoint_url=url, deadline=deadline, max_bytes=max_bytes)


def download_image(
    client: httpx.Client, image_url: str, *, endpoint_url: str, deadline: Deadline, max_bytes: int
) -> GeneratedImage:
    if not may_fetch(image_url, endpoint_url):
        raise InvalidAnswer(f"image url is neither https nor the endpoint's origin: {redact(image_url)[:120]}")
    fetch = GuardedRequest(
        image_url, None, {}, deadline, read_timeout_s=deadline.remaining_ms() / 1000, max_bytes=max_bytes, method="GET"
    )
    with GuardedPost(client, fetch) as call:
        if call.status != 200:
            raise call.status_error()
        data = b"".join(call.chunks())
    return sniff(data, max_bytes)
