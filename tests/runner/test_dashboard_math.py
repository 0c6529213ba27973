"""The dashboard's rates, computed as CloudWatch's metric math computes them, through ``chuixiang dashboard``'s
reader: a ``SEARCH`` is an array (``100 * ended / SUM(ended)`` is one share per status and code), ``FILL``
turns a period with stages and no failure into 0 %, not a gap."""

from __future__ import annotations

from pathlib import Path

import pytest
from stack_template import Template

from chuixiang_local.commands.cost import Assumptions
from chuixiang_local.commands.dashboard import Point, Widget, build

PERIOD_MS = 300_000
T0 = 1_800_000_000_000 // PERIOD_MS * PERIOD_MS


def _point(name: str, value: float, at: int = T0, **dims: str) -> Point:
    return Point("Chuixiang", name, frozenset({**dims, "service": "chuixiang"}.items()), value, at)


def _ended(code: str, status: str, at: int = T0) -> Point:
    return _point("JobsEnded", 1, at, Code=code, Status=status)


def _widget(points: list[Point], title_starts: str) -> Widget:
    return next(w for w in build(Template(), points) if w.title.startswith(title_starts))


def _shown(widget: Widget) -> dict[str, dict[int, float]]:
    return {s.label: s.values() for s in widget.series if s.visible}


def test_jobs_ended_are_shares_by_status_and_code_beside_their_count() -> None:
    points = [_ended("OK", "SUCCEEDED")] * 3 + [_ended("RECIPE_TIMEOUT", "FAILED")]
    points += [_ended("OK", "SUCCEEDED", T0 + PERIOD_MS)]
    shown = _shown(_widget(points, "Jobs ended"))
    assert shown == {
        "% JobsEnded Code=OK Status=SUCCEEDED": {T0: 75.0, T0 + PERIOD_MS: 100.0},
        "% JobsEnded Code=RECIPE_TIMEOUT Status=FAILED": {T0: 25.0},
        "jobs ended": {T0: 4.0, T0 + PERIOD_MS: 1.0},
    }


def test_the_image_failure_share_is_zero_in_a_period_without_failures() -> None:
    later = T0 + PERIOD_MS
    points = [_point("ImageTotalMs", ms) for ms in (900, 1200, 30_000, 800)] + [_point("ImageFailed", 1)]
    points += [_point("ImageTotalMs", 700, later), _point("ImageTotalMs", 650, later)]
    shown = _shown(_widget(points, "Images"))
    assert shown["image stages failed (%)"] == {T0: 25.0, later: 0.0}
    assert shown["ImageFailed"] == {T0: 1.0}


def test_spend_is_the_tokens_and_pictures_at_the_price_parameters_the_canary_apart() -> None:
    points = [_point("RecipeTokensUsed", 600_000, Model="m1"), _point("RecipeTokensUsed", 400_000, Model="m2")]
    points += [_point("RecipeTokensWasted", 250_000, Model="m1")]
    points += [_point("RecipeTokensUsed", 50_000, Model="m1", Source="canary")]
    points += [_point("ImagesDrawn", 1), _point("ImagesDrawn", 1), _point("ImagesDrawn", 1)]
    template = Template({"ModelUsdPerMillionTokens": "2", "ModelUsdPerImage": "0.04"})
    widget = next(w for w in build(template, points) if w.title.startswith("Model spend"))
    hour = T0 // 3_600_000 * 3_600_000
    assert _shown(widget) == {
        "users' recipes": {hour: 2.0},
        "of it wasted (failed or abandoned calls)": {hour: 0.5},
        "the canary": {hour: 0.1},
        "pictures": {hour: pytest.approx(0.12)},  # the image model's bill: 40 of 57 USD per 1,000 jobs
    }


def test_the_price_default_blends_the_cost_models_prices_at_a_recipes_tokens() -> None:
    assume = Assumptions()
    tokens = assume.recipe_prompt_tokens + assume.recipe_completion_tokens
    blended = assume.model_usd_per_recipe / tokens * 1e6
    assert float(Template().parameters["ModelUsdPerMillionTokens"]) == round(blended, 2)
    operations = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    assert f"the default, {Template().parameters['ModelUsdPerMillionTokens']}, blends" in operations
