"""Ctrl-C in a ``chuixiang`` command (``chuixiang_local.commands.ctrl_c``): a KeyboardInterrupt wherever the main
thread is, except inside an import, where the interpreter would print it and drop it: there it is sent again."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import FrameType

import pytest

from chuixiang_local.commands import ctrl_c

#: A module whose import hands the handler the frame it is imported in, as a signal landing there would.
IMPORTED = "from tests.runner.test_ctrl_c import handled_here\nhandled_here()\n"

seen: list[str] = []


def handled_here() -> None:
    frame: FrameType | None = sys._getframe(1)
    try:
        ctrl_c.on_ctrl_c(2, frame)
        seen.append("returned")
    except KeyboardInterrupt:
        seen.append("raised")


def test_outside_an_import_it_is_a_keyboard_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctrl_c, "resend_later", lambda: seen.append("resent"))
    with pytest.raises(KeyboardInterrupt):
        ctrl_c.on_ctrl_c(2, sys._getframe())


def test_inside_an_import_it_is_sent_again_not_raised(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(ctrl_c, "resend_later", lambda: seen.append("resent"))
    seen.clear()
    (tmp_path / "imported_under_ctrl_c.py").write_text(IMPORTED)
    spec = importlib.util.spec_from_file_location("imported_under_ctrl_c", tmp_path / "imported_under_ctrl_c.py")
    assert spec and spec.loader
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert seen == ["resent", "returned"]
