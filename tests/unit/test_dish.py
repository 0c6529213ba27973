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
        ("👨\u200d🍳的拿手菜", "👨\u200d🍳的拿手菜"),  # an emoji ZWJ sequence: "man cook"
        ("👩\u200d👩\u200d👧 家常菜", "👩\u200d👩\u200d👧 家常菜"),
        ("کباب\u200cها", "کباب\u200cها"),  # Persian: ZWNJ inside a word
        (
            "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f haggis",
            "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f haggis",
        ),
        ("كبسة 2 人份", "كبسة 2 人份"),
    ],
)
def test_normalize_accepts(raw: str, expected: str) -> None:
    assert normalize_dish(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "   ",
        "x" * 41,
        "番茄\x00炒蛋",
        "番茄\u200b炒蛋",
        "a\x1bb",
        42,
        None,
        "\u200d番茄",  # a joiner that joins nothing
        "番茄\u200d",
        "番茄 \u200d 炒蛋",
        "番茄\u200d\u200d炒蛋",
        "番茄\u202e蛋炒",  # a bidi override: text that reads other than it is
        "\U000e0067\U000e007f蛋",  # tag characters outside a flag
    ],
)
def test_normalize_rejects(raw: object) -> None:
    with pytest.raises(InvalidDish):
        normalize_dish(raw)
