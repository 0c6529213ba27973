"""The dish rule: what a user may type as a dish name, normalised."""

from __future__ import annotations

import pytest

from chuixiang.dish import InvalidDish, normalize_dish


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
