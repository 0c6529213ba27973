"""The error catalogue: every code has its Chinese message."""

from __future__ import annotations

from chuixiang.errors import CATALOGUE, ErrorCode


def test_every_code_has_a_chinese_message() -> None:
    assert set(CATALOGUE) == set(ErrorCode)
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in msg) for msg, _ in CATALOGUE.values())
