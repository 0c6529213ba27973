"""The timeout ladder is data: shipped defaults pass, wrong orderings are refused with both limits named."""

from __future__ import annotations

import subprocess

from ..support.commands import run_cli


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=60)


def test_ladder_command_exit_codes() -> None:
    ok = _cli("ladder")
    assert ok.returncode == 0 and "ladder OK" in ok.stdout
    assert "first content (RecipeFirstContentTimeoutMs)" in ok.stdout and "RecipeMinAttemptMs" in ok.stdout
    first = _cli("ladder", "--parameter-overrides", "RecipeFirstContentTimeoutMs=140000")
    assert first.returncode == 2
    assert "RecipeFirstContentTimeoutMs = 140000" in first.stderr and "RecipeTotalTimeoutMs = 140000" in first.stderr
    broken = _cli("ladder", "--parameter-overrides", "RecipeTotalTimeoutMs=150000")
    assert broken.returncode == 2
    assert "RecipeTotalTimeoutMs = 150000" in broken.stderr


def test_cook_refuses_a_broken_ladder_before_running() -> None:
    result = _cli(
        "cook", "番茄炒蛋", "--parameter-overrides", "RecipeIdleTimeoutMs=200000", "RecipeTotalTimeoutMs=140000"
    )
    assert result.returncode == 2
    assert "timeout ladder is broken" in result.stderr and "RecipeIdleTimeoutMs" in result.stderr
    assert "local cloud up" not in result.stderr
