"""The in-process tiers (``tests/unit``, the product's; ``tests/runner``, the local runner's own): a test there
that opens a network socket or starts a process fails (its fixtures too, whatever their scope), so a slow test
cannot drift into a fast tier. Each tier's ``conftest.py`` imports these hooks."""

from __future__ import annotations

import subprocess
from collections.abc import Generator, Iterator
from typing import NoReturn

import pytest
from pytest_socket import disable_socket, enable_socket

_POPEN_INIT = subprocess.Popen.__init__


def _refuse(*args: object, **kwargs: object) -> NoReturn:
    raise RuntimeError("a unit test starts no process: it belongs in tests/pipeline/")


def _guarded() -> Generator[None]:
    subprocess.Popen.__init__ = _refuse  # type: ignore[method-assign]
    disable_socket(allow_unix_socket=True)  # asyncio's event loop wakes itself through a Unix socketpair
    try:
        yield
    finally:
        enable_socket()
        subprocess.Popen.__init__ = _POPEN_INIT  # type: ignore[method-assign]


# The runtest hooks of a folder's conftest run only for its items; fixture setup happens inside them.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _wrap()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _wrap()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield from _wrap()


def _wrap() -> Iterator[None]:
    guard = _guarded()
    next(guard)
    try:
        return (yield)
    finally:
        guard.close()


def _settings_variables() -> set[str]:
    from chuixiang.settings import Settings

    names = set()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        names.add(alias if isinstance(alias, str) else name.upper())
    return names


@pytest.fixture(autouse=True)
def settings_from_the_test_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """An in-process test reads the settings it builds, never what ran before it in this worker exported: a local
    cloud's api environment (``RECIPE_SECTIONS=whole`` from a pipeline module) made ``auto``'s passes read 0 once."""
    for name in _settings_variables():
        monkeypatch.delenv(name, raising=False)
