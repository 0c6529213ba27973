"""An upstream that echoes the request's headers in its error body must not leak the model key into
the function log or the job's ``error.detail``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chuixiang.errors import clip_detail
from chuixiang.redaction import REDACTED, redact

KEY = "team-key-7f3a9c2e"  # not shaped like any known key: only knowing it redacts it


@pytest.fixture(autouse=True)
def _registry_as_it_was() -> Iterator[None]:
    """A secret a test registers is forgotten after it (the registry is process-wide)."""
    from chuixiang import redaction

    known, pieces = set(redaction._known), set(redaction._pieces)
    yield
    redaction._known.clear()
    redaction._known.update(known)
    redaction._pieces.clear()
    redaction._pieces.update(pieces)


def test_known_shapes_and_the_configured_key() -> None:
    text = 'auth "Bearer abc.def-123" key sk-proj-AbCdEf123456 api_key=hunter2hunter and ' + KEY
    out = redact(text, [KEY])
    for secret in ("abc.def-123", "sk-proj-AbCdEf123456", "hunter2hunter", KEY):
        assert secret not in out
    assert out.count(REDACTED) == 4
    assert redact("no secrets here: 番茄炒蛋 HTTP 503") == "no secrets here: 番茄炒蛋 HTTP 503"
    assert "sk-live-0123456789" not in clip_detail("upstream said sk-live-0123456789")


# --- by construction: any encoding, any piece, before any cut ------------------------------------------

DOTTED = "team.key-7f3a9c2e/0b1d.A9"  # a '.', a '/', upper case: what JSON producers escape differently


def _escaped(secret: str, *, upper: bool) -> str:
    """``secret`` as a JSON producer may write it: its '.' as ``\\u002e`` (or ``\\u002E``), '/' as ``\\/``."""
    dot = "\\u002E" if upper else "\\u002e"
    return secret.replace(".", dot).replace("/", "\\/")


def _pieces(secret: str) -> list[str]:
    return [secret[i : i + 8] for i in range(len(secret) - 7)]


def _leaks(text: str, secret: str = DOTTED) -> list[str]:
    return [p for p in _pieces(secret) if p in text]


def test_a_key_in_json_escapes_is_caught_in_the_raw_text_and_decoded() -> None:
    from chuixiang.redaction import register_secret

    register_secret(DOTTED)
    for upper in (False, True):
        raw = '{"summary": "echo ' + _escaped(DOTTED, upper=upper) + ' done"}'
        assert _leaks(redact(raw)) == [] and REDACTED in redact(raw)


def test_any_piece_of_the_key_is_removed_as_a_chunk_or_a_cut_leaves_it() -> None:
    from chuixiang.redaction import register_secret

    register_secret(DOTTED)
    for cut in (8, 13, len(DOTTED) - 1):
        head, tail = DOTTED[:cut], DOTTED[cut:]
        assert (_leaks(redact(f"...{head}")) == [] and _leaks(redact(f"{tail} 番茄")) == []) or len(tail) < 8
    assert redact("番茄炒蛋 team.ke") == "番茄炒蛋 team.ke"  # fewer than 8 characters: ordinary text


def test_a_detail_is_redacted_before_it_is_cut() -> None:
    """The error body echoes the key across the 300th character: the cut would have kept 8-21 of its first
    characters, unrecognisable as the key once alone."""
    import httpx

    from chuixiang.redaction import register_secret
    from chuixiang.upstream.failures import StatusError

    register_secret(DOTTED)
    for at in range(280, 300):
        body = ("x" * (at - len("HTTP 500: "))) + _escaped(DOTTED, upper=True) + "tail"
        failure = StatusError.from_response(httpx.Response(500), body.encode())
        assert _leaks(failure.detail) == [], (at, failure.detail[-40:])


def test_a_recipe_is_redacted_string_by_string_after_decoding() -> None:
    import json

    from model_samples import recipe_for

    from chuixiang.generation.recipe_format import parse_recipe
    from chuixiang.redaction import register_secret

    register_secret(DOTTED)
    recipe = recipe_for("番茄炒蛋")
    recipe["summary"] = "密钥是 " + DOTTED
    recipe["imagePrompt"] = "An overhead photo, key " + DOTTED
    text = json.dumps(recipe, ensure_ascii=False).replace(DOTTED, _escaped(DOTTED, upper=False))
    assert DOTTED not in text and json.loads(text)["summary"].endswith(DOTTED)  # escaped in the text only
    parsed = parse_recipe(text)
    assert _leaks(parsed.model_dump_json()) == [] and REDACTED in parsed.summary and REDACTED in parsed.imagePrompt


def test_a_key_too_short_to_redact_is_refused() -> None:
    from chuixiang.redaction import SecretTooShort, register_secret

    with pytest.raises(SecretTooShort):
        register_secret("short-1")


def _fully_escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def _key_pieces_in(text: str) -> list[str]:
    return [KEY[i : i + 8] for i in range(len(KEY) - 7) if KEY[i : i + 8] in text]


def test_redacting_valid_json_text_never_changes_what_it_means() -> None:
    """The raw text of a recipe is redacted too: a step holding ``\\u0022`` (a quote) or an escaped backslash
    before ``u0041`` must parse to the same recipe after (it failed RECIPE_INVALID before)."""
    import json

    doc = {"steps": [{"text": 'say "hi" \\u0041 back\\slash', "quote": "\u0022"}], "name": "A\\/B"}
    for text in (json.dumps(doc), json.dumps(doc, ensure_ascii=False)):
        assert json.loads(redact(text)) == doc, text
    raw = r'{"t": "a \u0022quoted\u0022 word, a path C:\\u0041dir, \u005c"}'
    assert json.loads(redact(raw)) == json.loads(raw)


def test_bytes_are_decoded_before_they_are_redacted_never_repr_d() -> None:
    """An upstream that JSON-escapes the whole key in an error event, an undecodable ``data:``, a non-JSON body
    or an images answer: the detail keeps no piece of it (before: ``\\s\\k\\-…``, the key with a backslash before
    each character, because the repr's doubled backslashes hid the escapes)."""
    from chuixiang.redaction import register_secret
    from chuixiang.upstream.chat_events import snippet
    from chuixiang.upstream.failures import InvalidAnswer
    from chuixiang.upstream.images import first_datum

    register_secret(KEY)
    escaped = _fully_escaped(KEY)
    for raw in (
        f'{{"error": {{"message": "bad key {escaped}"}}}}'.encode(),
        f'{{"broken": "{escaped}'.encode() + b"\xff\xfe",
        f"<html><body>key {escaped}</body></html>".encode(),
    ):
        detail = snippet(raw)
        assert not _key_pieces_in(detail.replace("\\\\", "\\")) and REDACTED in detail, detail
        assert "\\" + "\\".join(KEY[:4]) not in detail
    assert not _key_pieces_in(snippet(f"undecodable {escaped}"))
    with pytest.raises(InvalidAnswer) as raised:
        first_datum(f'{{"data": [], "note": "{escaped}"}}'.encode())
    assert not _key_pieces_in(str(raised.value)) and REDACTED in str(raised.value)


def test_the_key_in_base64_or_percent_encoded_is_removed_too() -> None:
    import base64
    from urllib.parse import quote

    from chuixiang.redaction import register_secret

    register_secret(KEY)
    for prefix in (b"", b"a", b"ab"):  # each alignment inside a longer base64 text
        blob = base64.b64encode(prefix + b"the key: " + KEY.encode() + b" end").decode()
        inner = base64.b64encode(KEY.encode()).decode()[4:-4]
        assert inner not in redact(blob) or inner not in blob
        assert REDACTED in redact(blob)
    assert redact(f"?key={quote('x/' + KEY, safe='')}") == f"?key=x%2F{REDACTED}"
