"""``chuixiang bench``: models of the fault server with distinct behaviours, each row checked; the
offline command with the embedded profiles writes its JSON, CSV and chart."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..support.commands import run_cli

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
    proc = run_cli("bench", *args, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
