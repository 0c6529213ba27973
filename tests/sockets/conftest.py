"""The sockets tier: real local servers that misbehave on purpose, the ladder scaled down; no local cloud."""

from __future__ import annotations

from typing import NoReturn

import pytest
from stack_template import Template

from chuixiang_local.cloud.local_cloud import LocalCloud

from ..support.scaled import SCALED


@pytest.fixture(scope="session")
def scaled_template() -> Template:
    """One stream's limits are this tier's subject: its recipes are written whole. Sections (``parallel``, and
    ``auto``, the default, choosing) have their own tests here (``test_parallel_sections``, ``test_auto_mode``);
    the pipeline tier runs the template's defaults."""
    return Template({**SCALED, "RecipeSections": "whole"})


@pytest.fixture(autouse=True)
def _no_local_cloud(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise RuntimeError("the sockets tier runs no local cloud: move the test to tests/pipeline/")

    monkeypatch.setattr(LocalCloud, "__init__", refuse)
