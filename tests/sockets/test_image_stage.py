"""The image stage alone on a real socket: retries only early 5xx / refused connections."""

from __future__ import annotations

import pytest
from stack_template import Template

from chuixiang.generation.image import ImageOutcome
from chuixiang_local.model.fake_model import FakeModel, ImageBehaviour

from ..support.scaled import LATE_S
from ..support.stages import run_image


def run(template: Template, base_url: str, budget_ms: float = 3000) -> tuple[ImageOutcome, float]:
    """``budget_ms`` is what the call may use: the Lambda's finishing margin comes on top."""
    return run_image(template, base_url, budget_ms + 500)


@pytest.mark.parametrize(
    ("script", "code", "requests"),
    [
        ([ImageBehaviour(status=503), ImageBehaviour()], None, 2),
        ([ImageBehaviour(status=429), ImageBehaviour(status=502), ImageBehaviour()], None, 3),
        ([ImageBehaviour(status=500, delay_s=0.8), ImageBehaviour()], "IMAGE_UPSTREAM_ERROR", 1),
        ([ImageBehaviour(status=400), ImageBehaviour()], "IMAGE_UPSTREAM_ERROR", 1),
        ([ImageBehaviour(kind="garbage"), ImageBehaviour()], "IMAGE_INVALID", 1),
    ],
)
def test_image_outcomes(
    fake: FakeModel, scaled_template: Template, script: list[ImageBehaviour], code: str | None, requests: int
) -> None:
    fake.image_script.extend(script)
    outcome, _ = run(scaled_template, fake.base_url)
    assert fake.count("/images/generations") == requests == outcome.metrics.attempts
    if code is None:
        assert outcome.error is None and outcome.result is not None and outcome.result.data.startswith(b"\x89PNG")
    else:
        assert outcome.error is not None and outcome.error.code == code


def test_stall_gives_up_at_the_budget_and_is_not_retried(fake: FakeModel, scaled_template: Template) -> None:
    fake.image_script.append(ImageBehaviour(delay_s=30))
    outcome, elapsed = run(scaled_template, fake.base_url, budget_ms=2000)
    assert outcome.error is not None and outcome.error.code == "IMAGE_TIMEOUT"
    assert fake.count("/images/generations") == 1
    assert 2.0 <= elapsed <= 2.0 + LATE_S


def test_refused_connection_is_retried_then_reported(scaled_template: Template) -> None:
    with FakeModel() as dead:
        url = dead.base_url
    outcome, _ = run(scaled_template, url)
    assert outcome.error is not None and outcome.error.code == "IMAGE_UPSTREAM_ERROR"
    assert outcome.metrics.attempts == 3
