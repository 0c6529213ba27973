"""The sockets tier: real local servers that misbehave on purpose, the ladder scaled down; no local cloud."""

from __future__ import annotations

from typing import NoReturn

import pytest

from chuixiang_local.cloud.local_cloud import LocalCloud


@pytest.fixture(autouse=True)
def _no_local_cloud(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise RuntimeError("the sockets tier runs no local cloud: move the test to tests/pipeline/")

    monkeypatch.setattr(LocalCloud, "__init__", refuse)
