"""An upstream that echoes the request's headers in its error body must not leak the model key into
the function log or the job's ``error.detail``."""

from __future__ import annotations

import pytest
from stack_template import Template

from chuixiang.errors import clip_detail
from chuixiang.redaction import REDACTED
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.stages import run_recipe

KEY = "team-key-7f3a9c2e"  # not shaped like any known key: only knowing it redacts it


def test_an_echoing_upstream_leaks_nothing(
    fake: FakeModel, scaled_template: Template, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.chat_script.append(ChatBehaviour(status=401, echo_headers=True))
    outcome, _ = run_recipe(scaled_template, fake.base_url, 5000, api_key=KEY)
    assert outcome.error is not None and outcome.error.code == "RECIPE_UPSTREAM_ERROR"
    assert "401" in outcome.error.detail and REDACTED in outcome.error.detail  # the echo was there
    assert KEY not in outcome.error.detail and KEY not in clip_detail(outcome.error.detail)
    logged = capsys.readouterr()
    assert KEY not in logged.out + logged.err
