"""Timing what a cold start pays: a snippet run in fresh interpreters, the median of what each printed last."""

from __future__ import annotations

import statistics
import subprocess  # nosec B404  # this interpreter, fixed code
import sys


def median_ms(code: str, env: dict[str, str], runs: int) -> float:
    """``code`` run ``runs`` times, each in a fresh interpreter of this one with ``env`` and this one's ``sys.path``
    (the venv's packages and the layer found as here); the median of the number each printed on its last line."""
    found = []
    for _ in range(runs):
        out = subprocess.run(  # nosec B603  # this interpreter
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**env, "PYTHONPATH": ":".join(sys.path)},
        )
        found.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(found)
