"""Keep credentials out of logs, job items and the workflow's history: an upstream may echo the
request's headers anywhere it answers (an error body, an SSE error event, a 200 body that is not
JSON, an undecodable stream line, an images answer).

One redactor, applied at the boundary: every :class:`~chuixiang.upstream.failures.UpstreamError`
redacts its detail when it is made, and the model's text is redacted before a stage keeps it. The
configured key is registered when its endpoint is built (:func:`register_secret`), so no caller has
to carry it to the place an upstream string turns into a detail; the patterns catch keys we were
never told about (bearer tokens, ``sk-…`` keys, ``api_key=…`` values).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

REDACTED = "[REDACTED]"
#: Shorter values are not secrets worth hiding, and replacing them would mangle ordinary text.
MIN_SECRET_CHARS = 8
_PATTERNS = (
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}"),  # an Authorization header's value
    re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"),  # OpenAI-style keys (sk-…, sk-proj-…, sk-ant-…)
    re.compile(r"(?i)(api[_-]?key|x-api-key|authorization)([\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{4,}"),
)
_known: set[str] = set()
_lock = threading.Lock()


def register_secret(secret: str | None) -> None:
    """Every later :func:`redact` replaces ``secret`` (the configured model key)."""
    if secret and len(secret) >= MIN_SECRET_CHARS:
        with _lock:
            _known.add(secret)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with each registered secret and each of ``secrets``, bearer tokens, ``sk-`` keys and
    ``api_key=…`` values replaced."""
    for secret in (*_known, *secrets):
        if secret and len(secret) >= MIN_SECRET_CHARS and secret in text:
            text = text.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) + (m.group(2) if m.re.groups > 1 else "") + REDACTED)
                           if m.re.groups else REDACTED, text)
    return text
