"""``-m`` selects on the tiers and on ``waiting`` (set from the folder, before selection): ``make test`` runs
``-m waiting`` in a lane of its own and ``-m "not waiting"`` over the workers, so together they run every test once."""

from __future__ import annotations

import re
import subprocess  # nosec B404  # pytest itself, collecting
import sys

from ..support.serve import ROOT


def _collected(marker: str) -> tuple[set[str], int]:
    """The selected tests' ids, and how many were collected before selection."""
    out = subprocess.run(  # nosec B603  # this interpreter's pytest, fixed arguments
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", "-m", marker],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    total = re.search(r"\d+/(\d+) tests collected", out)
    assert total, out[-2000:]
    return {line for line in out.splitlines() if "::" in line}, int(total[1])


def test_the_makefile_collects_every_waiting_test() -> None:
    """The lanes collect fewer folders than ``-m`` alone would: none of the others may hold a ``waiting`` test."""
    makefile = (ROOT / "Makefile").read_text()
    assert (
        "-m waiting tests/sockets tests/pipeline\n" in makefile
        and '-m "not waiting" --ignore=tests/sockets' in makefile
    )
    for tier in ("unit", "runner"):
        for module in (ROOT / "tests" / tier).glob("test_*.py"):
            assert "mark.waiting" not in module.read_text(), module


def test_the_two_lanes_are_every_test_once_and_every_sockets_test_waits() -> None:
    """One collection: ``-m waiting``'s selection, and the tests it deselected are the other lane's (``-m "not
    waiting"`` selects exactly those). A marker set after selection would leave this one empty."""
    waiting, total = _collected("waiting")
    assert waiting and len(waiting) < total
    sockets = {str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "sockets").glob("test_*.py")}
    assert sockets and sockets <= {n.split("::")[0] for n in waiting}
    marked = {n.split("::")[0] for n in waiting} - sockets
    assert "tests/pipeline/test_pipeline.py" in marked and all(m.startswith("tests/pipeline/") for m in marked)
