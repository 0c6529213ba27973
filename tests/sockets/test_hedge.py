"""Hedging the first token, on real sockets with the scaled ladder (hedge after 0.5 s, first content 1.5 s):
the first of two streams to write wins, the other is closed at once and recorded ``hedge_lost``."""

from __future__ import annotations

from typing import Any

import pytest
from stack_template import Template

from chuixiang.resilience.hedge import Hedge, HedgeBudget, HedgeRace
from chuixiang.timeouts import RECIPE_HEDGE_AFTER
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.scaled import LATE_S
from ..support.stages import run_recipe
from .test_fallback_breaker import FALLBACK, PRIMARY, budget_ms, settings_with_fallback


def _run(fake: FakeModel, template: Template, budget: HedgeBudget | None = None) -> Any:
    settings = settings_with_fallback(template, fake.base_url)
    after_ms = RECIPE_HEDGE_AFTER.of(settings)
    hedge = Hedge(after_ms, budget or HedgeBudget())
    outcome, _ = run_recipe(template, fake.base_url, budget_ms(template), settings=settings, hedge=hedge)
    return outcome, after_ms / 1000


@pytest.fixture
def began(monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    """When each model's first request began, on the router's own clock and at the instant it uses (the
    fake model's receipt times include each connection's set-up, which differs between the two calls)."""
    seen: dict[str, float] = {}
    original = HedgeRace.begin

    def begin(self: HedgeRace, model: str, at: float) -> None:
        original(self, model, at)
        seen.setdefault(model, at)

    monkeypatch.setattr(HedgeRace, "begin", begin)
    return seen


def _sent(fake: FakeModel, model: str) -> float:
    return next(t for path, t, m in fake.requests if m == model)


def _hung_up(fake: FakeModel, model: str) -> float:
    return next(t for path, t, m in fake.hung_up if m == model)


def test_a_primary_slow_to_write_is_hedged_and_the_hedge_wins(
    fake: FakeModel, scaled_template: Template, began: dict[str, float]
) -> None:
    fake.chat_by_model[PRIMARY] = ChatBehaviour(stall_after_chunks=0, stall_s=5, keepalive_every_s=0.1)
    outcome, after_s = _run(fake, scaled_template)
    assert outcome.result is not None and outcome.metrics.model == FALLBACK
    assert sorted((c.model, c.outcome) for c in outcome.metrics.calls) == [(FALLBACK, "ok"), (PRIMARY, "hedge_lost")]
    hedged_at = began[FALLBACK] - began[PRIMARY]
    assert after_s <= hedged_at < after_s + LATE_S  # the hedge started RecipeHedgeAfterMs after the primary
    # the loser's socket closed within 300 ms of the winner's first content (which came at once)
    assert _hung_up(fake, PRIMARY) - _sent(fake, FALLBACK) < LATE_S
    assert fake.count("/chat/completions") == 2


def test_a_primary_that_writes_first_keeps_the_job_and_the_hedge_is_closed(
    fake: FakeModel, scaled_template: Template
) -> None:
    fake.chat_by_model[PRIMARY] = ChatBehaviour(stall_after_chunks=0, stall_s=0.8, keepalive_every_s=0.1)
    fake.chat_by_model[FALLBACK] = ChatBehaviour(stall_after_chunks=0, stall_s=5, keepalive_every_s=0.1)
    outcome, _after_s = _run(fake, scaled_template)
    assert outcome.result is not None and outcome.metrics.model == PRIMARY
    assert sorted((c.model, c.outcome) for c in outcome.metrics.calls) == [(FALLBACK, "hedge_lost"), (PRIMARY, "ok")]
    primary_wrote = _sent(fake, PRIMARY) + 0.8
    assert _hung_up(fake, FALLBACK) - primary_wrote < LATE_S  # closed as soon as the primary wrote
    assert outcome.metrics.tokensWasted == sum(c.tokens for c in outcome.metrics.calls if c.model == FALLBACK)


def test_no_hedge_once_the_budget_is_spent(fake: FakeModel, scaled_template: Template) -> None:
    fake.chat_by_model[PRIMARY] = ChatBehaviour(stall_after_chunks=0, stall_s=0.8, keepalive_every_s=0.1)
    spent = HedgeBudget(share=0.0, burst=0.0)
    outcome, _ = _run(fake, scaled_template, spent)
    assert outcome.result is not None and [(c.model, c.outcome) for c in outcome.metrics.calls] == [(PRIMARY, "ok")]
    assert fake.count("/chat/completions", FALLBACK) == 0
