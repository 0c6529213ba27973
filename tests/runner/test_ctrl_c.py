"""Ctrl-C in a ``chuixiang`` command (``chuixiang_local.commands.ctrl_c``): a KeyboardInterrupt wherever the main
thread is, except inside an import, where the interpreter would print it and drop it: there it is sent again. A
command whose KeyboardInterrupt something caught still ends as interrupted (130)."""

from __future__ import annotations

import argparse
import importlib.util
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import pytest
from pydantic import BaseModel, field_serializer
from pydantic_core import PydanticSerializationError

from chuixiang_local.commands import cli, ctrl_c

#: A module whose import hands the handler the frame it is imported in, as a signal landing there would.
IMPORTED = "from tests.runner.test_ctrl_c import handled_here\nhandled_here()\n"

seen: list[str] = []


@pytest.fixture(autouse=True)
def _not_pressed_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own record of Ctrl-C (a command is a process of its own; these tests share one)."""
    monkeypatch.setattr(ctrl_c, "_PRESSED", threading.Event())


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


class Dish(BaseModel):
    name: str

    @field_serializer("name")
    def _ctrl_c_lands_here(self, name: str) -> str:
        """Where a Ctrl-C landed in a CI run: inside pydantic's serializer (Rust), called back in Python."""
        ctrl_c.on_ctrl_c(signal.SIGINT, sys._getframe())
        return name


def _answered(args: argparse.Namespace) -> int:
    """As ``chuixiang cook`` does when its POST is answered 500: the api function caught what the serializer made
    of the KeyboardInterrupt (its last line of defence), and the command ends 1."""
    try:
        Dish(name="番茄炒蛋").model_dump_json()
    except PydanticSerializationError as caught:
        assert "KeyboardInterrupt" in str(caught)
        return 1
    return 0


def test_a_ctrl_c_that_something_caught_still_ends_the_command_interrupted(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = argparse.ArgumentParser()
    parsed.set_defaults(func=_answered)
    monkeypatch.setattr(cli, "parser", lambda: parsed)
    assert cli.main([]) == 130
    assert ctrl_c.pressed()


def test_a_command_without_ctrl_c_ends_as_it_says(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = argparse.ArgumentParser()
    parsed.set_defaults(func=lambda args: 1)
    monkeypatch.setattr(cli, "parser", lambda: parsed)
    assert cli.main([]) == 1 and not ctrl_c.pressed()
