"""Keep credentials out of logs and job items: an upstream may echo the request's headers in its errors.

Applied where upstream text enters the system (an error body, an ``error`` event in
a stream) and again where details are stored (:func:`chuixiang.errors.clip_detail`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "[REDACTED]"
_PATTERNS = (
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}"),  # an Authorization header's value
    re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"),  # OpenAI-style keys (sk-…, sk-proj-…)
    re.compile(r"(?i)(api[_-]?key|x-api-key|authorization)([\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{4,}"),
)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with bearer tokens, ``sk-`` keys, ``api_key=…`` values and each of ``secrets`` replaced."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) + (m.group(2) if m.re.groups > 1 else "") + REDACTED)
                           if m.re.groups else REDACTED, text)
    return text
