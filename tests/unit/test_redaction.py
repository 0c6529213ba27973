"""An upstream that echoes the request's headers in its error body must not leak the model key into
the function log or the job's ``error.detail``."""

from __future__ import annotations

from chuixiang.errors import clip_detail
from chuixiang.redaction import REDACTED, redact

KEY = "team-key-7f3a9c2e"  # not shaped like any known key: only knowing it redacts it


def test_known_shapes_and_the_configured_key() -> None:
    text = 'auth "Bearer abc.def-123" key sk-proj-AbCdEf123456 api_key=hunter2hunter and ' + KEY
    out = redact(text, [KEY])
    for secret in ("abc.def-123", "sk-proj-AbCdEf123456", "hunter2hunter", KEY):
        assert secret not in out
    assert out.count(REDACTED) == 4
    assert redact("no secrets here: 番茄炒蛋 HTTP 503") == "no secrets here: 番茄炒蛋 HTTP 503"
    assert "sk-live-0123456789" not in clip_detail("upstream said sk-live-0123456789")


