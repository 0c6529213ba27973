"""Dish-name normalisation: the one rule shared by the API and the submit stage."""

from __future__ import annotations

import unicodedata

MAX_DISH_CHARS = 40


class InvalidDish(ValueError):
    """The dish name cannot be used; the message says why (shown to API callers)."""


#: The joiners (ZWNJ, ZWJ): invisible, yet part of what is written between two visible characters: an emoji ZWJ
#: sequence (👨‍🍳, "man cook", is 👨 ZWJ 🍳), Persian and Indic spellings (Unicode's Standard, 23.2 "Layout
#: Controls").
JOINERS = "\u200c\u200d"
#: An emoji tag sequence (a subdivision flag: 🏴 then tag letters, ended by CANCEL TAG; UTS #51, 2.8).
_BLACK_FLAG, _TAGS, _CANCEL_TAG = "\U0001f3f4", range(0xE0020, 0xE007F), "\U000e007f"


def _visible(ch: str) -> bool:
    return not ch.isspace() and unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn")


def _in_tag_sequence(text: str, i: int) -> bool:
    start = i
    while start > 0 and ord(text[start - 1]) in _TAGS:
        start -= 1
    end = text.find(_CANCEL_TAG, i)
    return start > 0 and text[start - 1] == _BLACK_FLAG and end != -1 and all(ord(c) in _TAGS for c in text[i:end])


def _hidden(text: str, i: int) -> bool:
    """Whether ``text[i]`` is a character no reader sees and none of the spellings above needs: controls,
    format characters (bidi overrides, zero-width spaces), surrogates, private use and unassigned code points."""
    ch = text[i]
    if ch in " \t" or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn"):
        return False
    if ch in JOINERS:
        return not (0 < i < len(text) - 1 and _visible(text[i - 1]) and _visible(text[i + 1]))
    if ord(ch) in _TAGS or ch == _CANCEL_TAG:
        return not _in_tag_sequence(text, i)
    return True


def normalize_dish(raw: object) -> str:
    """Trim, NFKC-fold and check a dish name.

    NFKC folds full-width letters and compatibility forms so that "番茄炒蛋" typed on
    different keyboards hits the same cache entry. Internal runs of white space
    collapse to one space.
    """
    if not isinstance(raw, str):
        raise InvalidDish("dish must be a string")
    text = unicodedata.normalize("NFKC", raw)
    if any(_hidden(text, i) for i in range(len(text))):
        raise InvalidDish("dish contains control, invisible or unassigned characters")
    text = " ".join(text.split())
    if not text:
        raise InvalidDish("dish is empty")
    if len(text) > MAX_DISH_CHARS:
        raise InvalidDish(f"dish is longer than {MAX_DISH_CHARS} characters ({len(text)})")
    return text
