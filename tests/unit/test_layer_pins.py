"""The layer ships the same versions the tests run: every pin of ``layers/shared/requirements.txt`` is the
pin ``pyproject.toml`` installs for the app (kept in step by hand before; now a mismatch fails here)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pins(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        match = re.fullmatch(r"\s*([A-Za-z0-9_.\[\]-]+?)(\[[^\]]*\])?==([^\s;#]+).*", line)
        if match:
            out[match.group(1).lower().replace("_", "-")] = match.group(3)
    return out


def test_the_layer_pins_what_the_app_is_tested_with() -> None:
    layer = _pins((ROOT / "layers" / "shared" / "requirements.txt").read_text().splitlines())
    project = _pins(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])
    assert layer, "the layer pins nothing?"
    assert {name: project.get(name) for name in layer} == layer
