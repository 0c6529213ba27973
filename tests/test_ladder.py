"""The timeout ladder is data: shipped defaults pass, wrong orderings are refused with both limits named."""

from __future__ import annotations

import subprocess
import sys

import pytest

from chuixiang_local.ladder import build_ladder
from chuixiang_local.template import ConfigError, Template

from .conftest import SCALED


def test_shipped_defaults_pass() -> None:
    ladder = build_ladder(Template())
    assert ladder.ok, ladder.failures()
    assert ladder.worst_path_s < Template().number("StateMachineTimeout")


def test_scaled_override_set_passes() -> None:
    assert build_ladder(Template(SCALED)).ok


@pytest.mark.parametrize(("overrides", "inner", "outer"), [
    ({"RecipeIdleTimeoutMs": "140000"}, "RecipeIdleTimeoutMs = 140000", "RecipeTotalTimeoutMs = 140000"),
    # The old accident: a setting's meaning changed, an old value stayed - here the total outgrows the Lambda.
    ({"RecipeTotalTimeoutMs": "150000"}, "RecipeTotalTimeoutMs = 150000", "RecipeFunctionTimeout (ms) = 150000"),
    ({"RecipeFunctionTimeout": "120"}, "RecipeTotalTimeoutMs = 140000", "RecipeFunctionTimeout (ms) = 120000"),
    ({"StateMachineTimeout": "250"}, "worst-case path", "state machine TimeoutSeconds = 250"),
    ({"ImageFunctionTimeout": "140"}, "worst-case path", "state machine TimeoutSeconds = 300"),
    ({"ClientGiveUpSeconds": "300"}, "state machine TimeoutSeconds = 300", "ClientGiveUpSeconds = 300"),
    ({"RecipeRetryWindowMs": "150000"}, "RecipeRetryWindowMs = 150000", "RecipeTotalTimeoutMs = 140000"),
    ({"RecipeMinAttemptMs": "150000"}, "RecipeMinAttemptMs = 150000", "RecipeTotalTimeoutMs = 140000"),
    ({"RecipeFirstContentTimeoutMs": "140000"}, "RecipeFirstContentTimeoutMs = 140000",
     "RecipeTotalTimeoutMs = 140000"),
    ({"RecipeIdleTimeoutMs": "60000"}, "RecipeIdleTimeoutMs = 60000", "RecipeFirstContentTimeoutMs = 60000"),
])
def test_wrong_orderings_fail_naming_both_limits(overrides: dict[str, str], inner: str, outer: str) -> None:
    ladder = build_ladder(Template(overrides))
    assert not ladder.ok
    failures = "\n".join(ladder.failures())
    assert inner in failures and outer in failures, failures


def test_lambda_timeout_must_be_inside_its_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Task state whose TimeoutSeconds does not exceed its Lambda's Timeout is refused."""
    import chuixiang_local.ladder as ladder_mod

    monkeypatch.setattr(ladder_mod, "state_timeout_seconds", lambda t: t)
    failures = "\n".join(build_ladder(Template()).failures())
    assert "RecipeFunction Timeout = 150 s  <  Recipe state TimeoutSeconds = 150 s" in failures


def test_unknown_or_malformed_override_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown parameter"):
        Template({"RecipeTimeoutMs": "1"})
    with pytest.raises(ConfigError, match="not a number"):
        Template({"RecipeTotalTimeoutMs": "soon"})


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chuixiang_local.cli", *args],
                          capture_output=True, text=True, timeout=60)


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
    result = _cli("cook", "番茄炒蛋", "--parameter-overrides",
                  "RecipeIdleTimeoutMs=200000", "RecipeTotalTimeoutMs=140000")
    assert result.returncode == 2
    assert "timeout ladder is broken" in result.stderr and "RecipeIdleTimeoutMs" in result.stderr
    assert "local cloud up" not in result.stderr
