"""The recipe stage's one entry: choose how to write the recipe (``RecipeSections``), write it, say why.

``auto`` (the default) asks :mod:`.mode_choice` per job, from the health of the model the job goes to first;
``whole`` and ``parallel`` fix the mode (``parallel`` still sizes its steps sections from what was measured).
A recipe written in sections whose parts do not merge (a step missing, a main ingredient in no step) is written
again whole when the stage's total limit leaves a whole attempt its minimum time: the user gets a recipe, later.
"""

from __future__ import annotations

from typing import Literal

import httpx

from ..deadline import Budget
from ..observability import logger
from ..resilience.health import ModelHealth
from ..resilience.router import Routes
from ..upstream.endpoint import ModelEndpoint
from .mode_choice import ModeChoice, choose
from .progress import ProgressReporter
from .recipe import RecipeLimits, RecipeOutcome, count_tokens, generate_recipe
from .recipe_in_sections import generate_recipe_in_sections
from .stage import Generation

SectionsSetting = Literal["auto", "whole", "parallel"]


def first_model_health(routes: Routes) -> tuple[str, ModelHealth | None]:
    """The model a job's recipe goes to first, and its health (read once: ``fastest`` has already read it)."""
    model = routes.ordered()[0]
    if routes.fastest is not None and model in routes.fastest.health:
        return model, routes.fastest.health[model]
    store = routes.health_for(model)
    return model, store.read() if store is not None else None


def choose_mode(
    routes: Routes, limits: RecipeLimits, budget: Budget, setting: SectionsSetting, max_streams: int
) -> ModeChoice:
    model, health = first_model_health(routes)
    return choose(
        health,
        model,
        max_streams=max_streams,
        remaining_ms=min(budget.remaining_ms(), limits.total_ms),
        only=None if setting == "auto" else setting,
    )


def write_recipe(
    client: httpx.Client,
    endpoint: ModelEndpoint,
    limits: RecipeLimits,
    dish: str,
    budget: Budget,
    routes: Routes,
    progress: ProgressReporter | None = None,
    *,
    setting: SectionsSetting = "auto",
    max_streams: int,
) -> RecipeOutcome:
    """The recipe for ``dish`` in the mode ``setting`` says (``auto``: the one predicted faster), within
    ``budget`` and the total limit; the metrics say which mode wrote it and why."""
    stage = budget.within(limits.total_ms)
    choice = choose_mode(routes, limits, stage, setting, max_streams)
    logger.info("recipe mode", extra={"mode": choice.mode, "modeReason": choice.reason, "ranges": choice.ranges})
    if choice.mode == "whole":
        outcome = generate_recipe(client, endpoint, limits, dish, stage, routes, progress)
    else:
        outcome = generate_recipe_in_sections(client, endpoint, limits, dish, stage, routes, progress, choice)
        if outcome.metrics.mergeFailure is not None:
            outcome.metrics.modeReason = choice.reason
            outcome = _whole_after_merge_failed(outcome, client, endpoint, limits, dish, stage, routes, progress)
    outcome.metrics.mode = outcome.metrics.mode or choice.mode
    outcome.metrics.modeReason = outcome.metrics.modeReason or choice.reason
    return outcome


def _whole_after_merge_failed(
    failed: RecipeOutcome,
    client: httpx.Client,
    endpoint: ModelEndpoint,
    limits: RecipeLimits,
    dish: str,
    stage: Budget,
    routes: Routes,
    progress: ProgressReporter | None,
) -> RecipeOutcome:
    """The recipe written whole after its sections did not merge, when the time left holds a whole attempt
    (else the merge's ``RECIPE_INVALID`` stands). Every call of both is on the bill."""
    left = stage.remaining_ms()
    detail = failed.metrics.mergeFailure
    if left < limits.retry.min_attempt_ms:
        logger.warning("sections did not merge; no time left to write it whole", extra={"detail": detail})
        return failed
    logger.warning("sections did not merge: writing it whole", extra={"detail": detail, "remaining_ms": round(left)})
    whole = generate_recipe(client, endpoint, limits, dish, stage, routes, progress)
    m, before = whole.metrics, failed.metrics
    m.calls = [*before.calls, *m.calls]
    m.attempts += before.attempts
    m.totalMs = before.totalMs + m.totalMs
    m.sections, m.mergeFailure = before.sections, detail
    m.mode = "whole"
    m.modeReason = f"{before.modeReason or 'parallel'}; the sections did not merge ({detail}): written whole"
    count_tokens(m)  # the bill of both; the sections' answers were thrown away: wasted too
    m.tokensWasted += sum(c.tokens for c in before.calls if c.outcome == "ok")
    return Generation(whole.result, whole.error, m)
