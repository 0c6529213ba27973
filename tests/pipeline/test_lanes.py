"""``-m`` selects on the tiers and on ``waiting`` (set from the folder, before selection): ``make test`` runs
``-m waiting`` in a lane of its own and ``-m "not waiting"`` over the workers, so together they run every test once."""

from __future__ import annotations

import subprocess  # nosec B404  # pytest itself, collecting
import sys
from pathlib import Path

from ..support.serve import ROOT


def _collected(marker: str) -> set[str]:
    out = subprocess.run(  # nosec B603  # this interpreter's pytest, fixed arguments
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", "-m", marker],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return {line for line in out.splitlines() if "::" in line}


def test_the_two_lanes_are_every_test_once_and_every_sockets_test_waits() -> None:
    waiting, rest, sockets = _collected("waiting"), _collected("not waiting"), _collected("sockets")
    assert waiting and rest and not waiting & rest
    assert sockets and sockets <= waiting
    assert all(Path(n.split("::")[0]).parts[1] == "sockets" for n in sockets)
    marked = {n.split("::")[0] for n in waiting - sockets}
    assert "tests/pipeline/test_pipeline.py" in marked and all(m.startswith("tests/pipeline/") for m in marked)
    assert len(waiting | rest) == len(_collected("unit or runner or sockets or pipeline"))
