"""One OpenAI-compatible ``images/generations`` call (``b64_json``), read inside the deadline."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from ..deadline import Deadline
from .failures import AnswerTooLarge, InvalidAnswer
from .transport import GuardedPost

SIGNATURES = {b"\x89PNG\r\n\x1a\n": ("image/png", "png"), b"\xff\xd8\xff": ("image/jpeg", "jpg")}


class _ImageDatum(BaseModel):
    b64_json: str


class ImagesResponse(BaseModel):
    data: list[_ImageDatum]


@dataclass(frozen=True)
class GeneratedImage:
    data: bytes
    content_type: str
    extension: str


def decode_image(body: bytes, max_bytes: int) -> GeneratedImage:
    try:
        datum = ImagesResponse.model_validate_json(body).data[0]
        data = base64.b64decode(datum.b64_json, validate=True)
    except (ValidationError, IndexError, binascii.Error, ValueError) as exc:
        raise InvalidAnswer(f"unexpected images response: {str(exc)[:200]}") from None
    if len(data) > max_bytes:
        raise AnswerTooLarge(f"image of {len(data)} bytes > {max_bytes}")
    for magic, (ctype, ext) in SIGNATURES.items():
        if data.startswith(magic):
            return GeneratedImage(data, ctype, ext)
    raise InvalidAnswer(f"bytes are not PNG/JPEG: {data[:8]!r}")


def request_image(client: httpx.Client, url: str, payload: dict[str, Any], headers: dict[str, str], *,
                  deadline: Deadline, max_bytes: int) -> GeneratedImage:
    """POST and read the whole answer before the deadline; the answer may be silent until then."""
    remaining_s = deadline.remaining_ms() / 1000
    # base64 is 4/3 of the bytes, plus the JSON around it
    with GuardedPost(client, url, payload, headers, deadline=deadline, read_timeout_s=remaining_s,
                     max_bytes=max_bytes * 2) as call:
        if call.status != 200:
            raise call.status_error()
        body = b"".join(call.chunks())
    return decode_image(body, max_bytes)
