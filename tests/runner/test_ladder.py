"""The timeout ladder is data: shipped defaults pass, wrong orderings are refused with both limits named."""

from __future__ import annotations

import pytest
from stack_template import ConfigError, Template

from chuixiang_local.commands.ladder import build_ladder

from ..support.scaled import SCALED


def test_shipped_defaults_pass() -> None:
    ladder = build_ladder(Template())
    assert ladder.ok, ladder.failures()
    assert ladder.worst_path_s < Template().number("StateMachineTimeout")


def test_scaled_override_set_passes() -> None:
    assert build_ladder(Template(SCALED)).ok


@pytest.mark.parametrize(
    ("overrides", "inner", "outer"),
    [
        ({"RecipeIdleTimeoutMs": "140000"}, "RecipeIdleTimeoutMs = 140000", "RecipeTotalTimeoutMs = 140000"),
        # The old accident: a setting's meaning changed, an old value stayed - here the total outgrows the Lambda.
        ({"RecipeTotalTimeoutMs": "150000"}, "RecipeTotalTimeoutMs = 150000", "RecipeFunctionTimeout (ms) = 150000"),
        ({"RecipeFunctionTimeout": "120"}, "RecipeTotalTimeoutMs = 140000", "RecipeFunctionTimeout (ms) = 120000"),
        ({"StateMachineTimeout": "250"}, "worst-case path", "state machine TimeoutSeconds = 250"),
        ({"ImageFunctionTimeout": "140"}, "worst-case path", "state machine TimeoutSeconds = 300"),
        ({"ClientGiveUpSeconds": "300"}, "state machine TimeoutSeconds = 300", "ClientGiveUpSeconds = 300"),
        ({"RecipeRetryWindowMs": "150000"}, "RecipeRetryWindowMs = 150000", "RecipeTotalTimeoutMs = 140000"),
        ({"RecipeMinAttemptMs": "150000"}, "RecipeMinAttemptMs = 150000", "RecipeTotalTimeoutMs = 140000"),
        (
            {"RecipeFirstContentTimeoutMs": "140000"},
            "RecipeFirstContentTimeoutMs = 140000",
            "RecipeTotalTimeoutMs = 140000",
        ),
        ({"RecipeIdleTimeoutMs": "60000"}, "RecipeIdleTimeoutMs = 60000", "RecipeFirstContentTimeoutMs = 60000"),
    ],
)
def test_wrong_orderings_fail_naming_both_limits(overrides: dict[str, str], inner: str, outer: str) -> None:
    ladder = build_ladder(Template(overrides))
    assert not ladder.ok
    failures = "\n".join(ladder.failures())
    assert inner in failures and outer in failures, failures


def test_lambda_timeout_must_be_inside_its_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Task state whose TimeoutSeconds does not exceed its Lambda's Timeout is refused."""
    import chuixiang_local.commands.ladder as ladder_mod

    monkeypatch.setattr(ladder_mod, "state_timeout_seconds", lambda t: t)
    failures = "\n".join(build_ladder(Template()).failures())
    assert "RecipeFunction Timeout = 150 s  <  Recipe state TimeoutSeconds = 150 s" in failures


def test_unknown_or_malformed_override_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown parameter"):
        Template({"RecipeTimeoutMs": "1"})
    with pytest.raises(ConfigError, match="not a number"):
        Template({"RecipeTotalTimeoutMs": "soon"})
