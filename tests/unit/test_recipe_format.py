"""How model text becomes a recipe: fences and prose around it, hard validation, the item size."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from model_samples import recipe_for

from chuixiang.errors import ErrorCode, StageError
from chuixiang.generation.recipe_format import parse_recipe


def test_recipe_parses_with_fences_and_prose() -> None:
    text = "好的，菜谱如下：\n```json\n" + json.dumps(recipe_for("鱼香肉丝"), ensure_ascii=False) + "\n```\n祝你好胃口"
    assert parse_recipe(text).name == "鱼香肉丝"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r.update(steps=r["steps"][:5]),
        lambda r: r["ingredients"].update(main=[]),
        lambda r: r.update(imagePrompt="  "),
        lambda r: r["nutrition"].update(fatG="lots"),
    ],
)
def test_recipe_hard_validation(mutate: Callable[[dict[str, Any]], None]) -> None:
    recipe = recipe_for("回锅肉")
    mutate(recipe)
    with pytest.raises(StageError) as err:
        parse_recipe(json.dumps(recipe, ensure_ascii=False))
    assert err.value.code is ErrorCode.RECIPE_INVALID


def test_truncated_json_is_invalid() -> None:
    text = json.dumps(recipe_for("回锅肉"), ensure_ascii=False)
    with pytest.raises(StageError) as err:
        parse_recipe(text[: len(text) // 2])
    assert err.value.code is ErrorCode.RECIPE_INVALID


def test_a_recipe_larger_than_a_job_item_can_hold_is_refused_and_never_shown() -> None:
    """DynamoDB items hold 400 KB: the largest recipe kept fits, one byte more is RECIPE_INVALID,
    and a partial recipe past that size is no longer shown (its progress write would be refused)."""
    from model_samples import largest_recipe

    from chuixiang.generation.progress import partial_recipe
    from chuixiang.generation.recipe_format import RECIPE_MAX_BYTES

    largest = largest_recipe("大菜")
    assert parse_recipe(json.dumps(largest, ensure_ascii=False)).name == "大菜"
    too_big = {**largest, "summary": "多" * (RECIPE_MAX_BYTES // 3)}
    with pytest.raises(StageError) as refused:
        parse_recipe(json.dumps(too_big, ensure_ascii=False))
    assert refused.value.code == ErrorCode.RECIPE_INVALID and "bytes" in refused.value.detail
    streamed = json.dumps(too_big, ensure_ascii=False)
    assert partial_recipe(streamed[: streamed.index('"steps"') + 200]) is None  # summary alone is over the size
    small = json.dumps(recipe_for("小菜"), ensure_ascii=False)
    assert partial_recipe(small[: small.index('"steps"') + 5]) is not None
