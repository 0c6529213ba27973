"""Small pure functions: dish normalisation, recipe parsing, retry decisions, Retry-After."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from chuixiang.dish import InvalidDish, normalize_dish
from chuixiang.errors import CATALOGUE, ErrorCode, StageError
from chuixiang.generation.recipe_format import parse_recipe
from chuixiang.resilience.retry import RetryPolicy, decide_retry
from chuixiang.upstream.failures import (
    ConnectionDropped,
    IdleTimeout,
    StatusError,
    UpstreamError,
    retry_after_seconds,
)
from chuixiang_local.model.fake_model import make_png, recipe_for


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  番茄炒蛋 ", "番茄炒蛋"),
        ("ＡＢＣ炒饭", "ABC炒饭"),  # NFKC folds full-width letters
        ("麻婆   豆腐", "麻婆 豆腐"),
        ("x" * 40, "x" * 40),
    ],
)
def test_normalize_accepts(raw: str, expected: str) -> None:
    assert normalize_dish(raw) == expected


@pytest.mark.parametrize("raw", ["", "   ", "x" * 41, "番茄\x00炒蛋", "番茄\u200b炒蛋", "a\x1bb", 42, None])
def test_normalize_rejects(raw: object) -> None:
    with pytest.raises(InvalidDish):
        normalize_dish(raw)


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


def test_every_code_has_a_chinese_message() -> None:
    assert set(CATALOGUE) == set(ErrorCode)
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in msg) for msg, _ in CATALOGUE.values())


def _decide(failure: UpstreamError, *, attempt: int = 1, elapsed_ms: float = 10, remaining_ms: float = 4000) -> bool:
    policy = RetryPolicy(max_attempts=2, window_ms=500, min_attempt_ms=2000, base_backoff_s=0.1)
    return decide_retry(failure, attempt=attempt, elapsed_ms=elapsed_ms, remaining_ms=remaining_ms, policy=policy).retry


def test_retry_rule() -> None:
    transient = StatusError("503", status=503)
    assert _decide(transient)
    assert not _decide(transient, elapsed_ms=600)  # late
    assert not _decide(transient, attempt=2)  # one retry at most
    assert not _decide(transient, remaining_ms=1500)  # no room for a typical attempt
    assert not _decide(IdleTimeout("idle"))  # timeouts never
    assert not _decide(ConnectionDropped("mid", bytes_received=10, content_started=True))
    assert _decide(ConnectionDropped("before any byte"))
    assert not _decide(StatusError("401", status=401))  # the request is refused, not the upstream down
    too_long = StatusError("429", status=429, retry_after_s=30)
    assert not _decide(too_long)  # Retry-After does not fit the budget
    fits = StatusError("429", status=429, retry_after_s=0.2)
    assert _decide(fits)


def test_retry_after_parsing() -> None:
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert retry_after_seconds("soon") is None


def test_fake_png_is_a_png() -> None:
    data = make_png(seed=3)
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and data.endswith(b"IEND\xaeB`\x82")


def test_a_recipe_larger_than_a_job_item_can_hold_is_refused_and_never_shown() -> None:
    """DynamoDB items hold 400 KB: the largest recipe kept fits, one byte more is RECIPE_INVALID,
    and a partial recipe past that size is no longer shown (its progress write would be refused)."""
    from chuixiang.generation.progress import partial_recipe
    from chuixiang.generation.recipe_format import RECIPE_MAX_BYTES
    from chuixiang_local.model.fake_model import largest_recipe

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
