"""How a text is reduced before a key is looked for in it (``chuixiang.key_forms``)."""

from __future__ import annotations

import sys
import unicodedata

from chuixiang.key_forms import decoded, key_pieces, reduced


def test_every_character_that_only_separates_is_removed() -> None:
    """Every control, format, surrogate and separator character Unicode has (the removal is one regex, for speed:
    it must not miss a category member the per-character rule would have caught)."""
    kept = [
        hex(c)
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in ("Cc", "Cf", "Cs", "Zs", "Zl", "Zp") and reduced(f"a{chr(c)}b") != "ab"
    ]
    assert kept == []
    assert reduced("番茄炒蛋 Tomato-egg_stir.fry") == "番茄炒蛋Tomatoeggstirfry"  # letters of every script stay


def test_a_text_is_decoded_to_a_fixed_point() -> None:
    assert decoded("\\\\\\\\u0041%2542&amp;#67;") == "ABC"  # an escape escaped twice, %25 (a percent), &amp;#
    assert decoded("plain 100% & more") == "plain 100% & more"


def test_a_recipe_is_no_key() -> None:
    pieces = key_pieces("sk-proj-Qm9aX7kLp2Vt8RzW4nYe")
    recipe = "番茄炒蛋：鸡蛋 3 个，番茄 2 个。An overhead photo of tomato and egg on a white plate, 0123456789 kcal."
    assert not pieces.found_in(recipe) and pieces.found_in(recipe + "sk proj qm9a x7kl")
