"""``chuixiang bench``: models of the fault server with distinct behaviours, each row checked; the
offline command with the embedded profiles writes its JSON, CSV and chart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "args",
    [
        ["--runs", "0"],
        ["--model-base-url", "http://127.0.0.1:9/v1"],
        ["--parameter-overrides", "NoSuchParameter=1"],
        ["--concurrency", "x"],
    ],
)
def test_bench_bad_usage_exits_2(args: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "chuixiang_local.commands.cli", "bench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
