"""Dish-name normalisation: the one rule shared by the API and the submit stage."""

from __future__ import annotations

import unicodedata

MAX_DISH_CHARS = 40


class InvalidDish(ValueError):
    """The dish name cannot be used; the message says why (shown to API callers)."""


def normalize_dish(raw: object) -> str:
    """Trim, NFKC-fold and check a dish name.

    NFKC folds full-width letters and compatibility forms so that "番茄炒蛋" typed on
    different keyboards hits the same cache entry. Internal runs of white space
    collapse to one space.
    """
    if not isinstance(raw, str):
        raise InvalidDish("dish must be a string")
    text = unicodedata.normalize("NFKC", raw)
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn") for ch in text if ch not in " \t"):
        raise InvalidDish("dish contains control, invisible or unassigned characters")
    text = " ".join(text.split())
    if not text:
        raise InvalidDish("dish is empty")
    if len(text) > MAX_DISH_CHARS:
        raise InvalidDish(f"dish is longer than {MAX_DISH_CHARS} characters ({len(text)})")
    return text
