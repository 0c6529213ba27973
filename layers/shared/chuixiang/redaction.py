"""Keep credentials out of everything stored or logged.

Out of logs, job items, the recipe cache, the job document and the workflow's history:
a model may echo the request's headers anywhere it answers (its text, a finish reason, an error body of
any status, an SSE error event, a body that is not JSON, an images answer), in any encoding a JSON or SSE
producer uses.

Held by construction, not by listing echo paths:

* one redactor, applied where model text becomes ours: every :class:`~chuixiang.upstream.failures.
  UpstreamError` redacts its detail when it is made; a recipe is redacted string by string after its JSON
  is decoded (so a key written ``\\u002e``-escaped is caught decoded); the finish reason and the text a
  progress write shows go through it too;
* it reads JSON escapes of ASCII (``\\u0041``, any hex case, ``\\/``) as the characters they stand for, and
  replaces every run of :data:`MIN_SECRET_CHARS` or more characters of a registered secret, so a key cut
  by a chunk boundary or a length limit leaves no piece behind;
* it runs before any cut to length (a detail, a snippet), never after;
* a key too short to be told apart from ordinary text is refused when it is registered: the function's
  init fails, loudly, instead of storing what it cannot hide.

The configured key is registered when its endpoint is built (:func:`register_secret`), so no caller has to
carry it; the patterns catch keys we were never told about (bearer tokens, ``sk-…`` keys, ``api_key=…``).

What the in-place removal leaves is then read in every form a reader could decode (:mod:`.key_forms`: escaped to
any depth, percent- or entity-encoded, NFKC, NUL- or zero-width-separated, case-folded; the key reversed, in rot13,
hex, base32, base64 of UTF-8 and UTF-16): a text still holding a piece of a registered key in any of them is not
kept at all, only :func:`echo_notice` (that the provider's answer echoed the credentials, and its length).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

from .key_forms import KeyPieces, base64_forms, key_pieces

REDACTED = "[REDACTED]"
#: The shortest secret the redactor accepts, and the shortest piece of one it removes: a shorter run of a
#: key's characters is ordinary text (a word, a number), and removing it would mangle recipes.
MIN_SECRET_CHARS = 8
_PATTERNS = (
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}"),  # an Authorization header's value
    re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"),  # OpenAI-style keys (sk-…, sk-proj-…, sk-ant-…)
    re.compile(r"(?i)(api[_-]?key|x-api-key|authorization)([\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{4,}"),
)
#: A JSON escape of a printable ASCII character (a key is ASCII) or of the solidus, not itself escaped (after an
#: even run of backslashes). ``"`` and ``\\`` stay escaped: a key holds neither, and un-escaping them would change
#: what JSON text means (the raw text of a recipe is redacted too, and must still parse to the same recipe).
_ASCII_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)(?:\\u00(?!22|5[cC])([2-7][0-9a-fA-F])|\\/)")
_known: set[str] = set()
_pieces: set[str] = set()
_registered: list[str] = []
_forms = KeyPieces(frozenset(), frozenset())
_lock = threading.Lock()
#: What is kept of a text in which a key was found in some encoding: this, and the text's length.
ECHO_NOTICE = "[the provider's answer echoed the credentials"


def echo_notice(text: str) -> str:
    """What is kept of ``text`` once a key was found in it: that, and how long it was."""
    return f"{ECHO_NOTICE}: {len(text)} characters withheld]"


def is_echo_notice(text: str) -> bool:
    return text.startswith(ECHO_NOTICE)


def key_echoed(text: str, secrets: Iterable[str | None] = ()) -> bool:
    """Whether ``text`` holds a piece of a registered secret (or of ``secrets``) in any form a reader could
    decode (:mod:`.key_forms`)."""
    extra = [s for s in secrets if s and len(s) >= MIN_SECRET_CHARS]
    with _lock:
        forms = _forms
    return forms.found_in(text) or (bool(extra) and key_pieces(*extra).found_in(text))


class SecretTooShort(ValueError):
    """A secret shorter than :data:`MIN_SECRET_CHARS`: it could not be redacted without mangling text."""


def register_secret(secret: str | None) -> None:
    """Every later :func:`redact` removes ``secret`` (the configured model key) and any piece of it."""
    if not secret:
        return
    if len(secret) < MIN_SECRET_CHARS:
        raise SecretTooShort(
            f"the model key has {len(secret)} characters; at least {MIN_SECRET_CHARS} are needed "
            "to keep it out of logs and job documents"
        )
    global _forms
    with _lock:
        for form in (secret, *encoded_forms(secret)):
            _known.add(form)
            _pieces.update(_pieces_of(form))
        if secret not in _registered:
            _registered.append(secret)
            _forms = key_pieces(*_registered)


def encoded_forms(secret: str) -> list[str]:
    """How else a model or a proxy may write ``secret``: percent-encoded, and in base64 (standard and URL-safe)
    at each of the three alignments it can have inside a longer base64 text (the characters its bytes alone
    decide)."""
    forms = {quote(secret, safe=""), quote_plus(secret), *base64_forms(secret.encode())}
    return sorted(f for f in forms if f != secret and len(f) >= MIN_SECRET_CHARS)


def _pieces_of(secret: str) -> set[str]:
    """Every run of :data:`MIN_SECRET_CHARS` characters of ``secret``."""
    return {secret[i : i + MIN_SECRET_CHARS] for i in range(len(secret) - MIN_SECRET_CHARS + 1)}


def _unescape_ascii(text: str) -> str:
    if "\\" not in text:
        return text
    return _ASCII_ESCAPE.sub(lambda m: m.group(1) + (chr(int(m.group(2), 16)) if m.group(2) else "/"), text)


def redact_bytes(raw: bytes) -> str:
    """What an upstream sent, as text with every secret removed: decoded first (UTF-8, undecodable bytes
    replaced), then redacted; never the ``repr`` of the bytes, whose doubled backslashes would hide an escaped
    key from the JSON un-escaping."""
    return redact(raw.decode("utf-8", "replace"))


def _without_pieces(text: str, pieces: set[str]) -> str:
    """``text`` with every run made of overlapping secret pieces replaced by one :data:`REDACTED`."""
    spans: list[list[int]] = []
    for i in range(len(text) - MIN_SECRET_CHARS + 1):
        if text[i : i + MIN_SECRET_CHARS] in pieces:
            end = i + MIN_SECRET_CHARS
            if spans and i <= spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], end)
            else:
                spans.append([i, end])
    for start, end in reversed(spans):
        text = text[:start] + REDACTED + text[end:]
    return text


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with each registered secret, each of ``secrets`` and every piece of them, bearer tokens,
    ``sk-`` keys and ``api_key=…`` values replaced; JSON escapes of ASCII read as what they stand for. A text that
    still holds a secret in another encoding is withheld whole (:func:`echo_notice`)."""
    secrets = list(secrets)
    removed = _removed(text, secrets)
    return echo_notice(text) if key_echoed(removed, secrets) else removed


def _removed(text: str, secrets: list[str | None]) -> str:
    """``text`` with the plain forms of the secrets and the patterns replaced in place."""
    text = _unescape_ascii(text)
    extra = [s for s in secrets if s and len(s) >= MIN_SECRET_CHARS]
    with _lock:
        known, pieces = [*_known, *extra], set(_pieces)
    for secret in known:
        if secret in text:
            text = text.replace(secret, REDACTED)
    for secret in extra:
        pieces |= _pieces_of(secret)
    if pieces and len(text) >= MIN_SECRET_CHARS:
        text = _without_pieces(text, pieces)
    for pattern in _PATTERNS:
        text = pattern.sub(
            lambda m: (m.group(1) + (m.group(2) if m.re.groups > 1 else "") + REDACTED) if m.re.groups else REDACTED,
            text,
        )
    return text


def redact_tree(value: Any) -> Any:
    """Every string of decoded JSON (keys and values) through :func:`redact`."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_tree(v) for v in value]
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_tree(v) for k, v in value.items()}
    return value
