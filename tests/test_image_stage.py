"""The image stage alone on a real socket: retries only early 5xx / refused connections."""

from __future__ import annotations

import time

import httpx
import pytest

from chuixiang.deadline import Budget
from chuixiang.image_stage import generate_image
from chuixiang.settings import Settings
from chuixiang_local.fake_model import FakeModel, ImageBehaviour
from chuixiang_local.template import Template

from .conftest import LATE_S


def image_settings(template: Template, base_url: str) -> Settings:
    return Settings(**{**template.function_by_dir("image").env, "MODEL_BASE_URL": base_url})


def run(template: Template, base_url: str, budget_ms: float = 3000) -> tuple[object, float]:
    started = time.monotonic()
    with httpx.Client() as client:
        outcome = generate_image(client, image_settings(template, base_url), "a dish", Budget(budget_ms + 500, None),
                                 api_key=None)
    return outcome, time.monotonic() - started


@pytest.mark.parametrize(("script", "code", "requests"), [
    ([ImageBehaviour(status=503), ImageBehaviour()], None, 2),
    ([ImageBehaviour(status=429), ImageBehaviour(status=502), ImageBehaviour()], None, 3),
    ([ImageBehaviour(status=500, delay_s=0.8), ImageBehaviour()], "IMAGE_UPSTREAM_ERROR", 1),
    ([ImageBehaviour(status=400), ImageBehaviour()], "IMAGE_UPSTREAM_ERROR", 1),
    ([ImageBehaviour(kind="garbage"), ImageBehaviour()], "IMAGE_INVALID", 1),
])
def test_image_outcomes(fake: FakeModel, scaled_template: Template, script: list[ImageBehaviour],
                        code: str | None, requests: int) -> None:
    fake.image_script.extend(script)
    outcome, _ = run(scaled_template, fake.base_url)
    assert fake.count("/images/generations") == requests == outcome.metrics.attempts  # type: ignore[attr-defined]
    if code is None:
        assert outcome.error is None and outcome.image.data.startswith(b"\x89PNG")  # type: ignore[attr-defined]
    else:
        assert outcome.error.code == code  # type: ignore[attr-defined]


def test_stall_gives_up_at_the_budget_and_is_not_retried(fake: FakeModel, scaled_template: Template) -> None:
    fake.image_script.append(ImageBehaviour(delay_s=30))
    outcome, elapsed = run(scaled_template, fake.base_url, budget_ms=2000)
    assert outcome.error.code == "IMAGE_TIMEOUT" and fake.count("/images/generations") == 1  # type: ignore[attr-defined]
    assert 2.0 <= elapsed <= 2.0 + LATE_S


def test_refused_connection_is_retried_then_reported(scaled_template: Template) -> None:
    with FakeModel() as dead:
        url = dead.base_url
    outcome, _ = run(scaled_template, url)
    assert outcome.error.code == "IMAGE_UPSTREAM_ERROR"  # type: ignore[attr-defined]
    assert outcome.metrics.attempts == 3  # type: ignore[attr-defined]
