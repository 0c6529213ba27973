"""Where a job's model calls may go: the routes of the recipe and image stages, wired to the stores behind them.

The router (:mod:`chuixiang.resilience.router`) decides; this builds what it decides over for one job: each
model's breaker and measured health in the jobs table, ``fastest`` ordering and the hedge, from the settings.
It sits above the stores (the router below them does not know the table).
"""

from __future__ import annotations

from collections.abc import Callable

from .resilience.breaker import BreakerConfig, CircuitBreaker
from .resilience.calls import Routes
from .resilience.fastest import FastestFirst
from .resilience.hedge import Hedge, hedge_budget
from .settings import Settings
from .stores.breaker_store import DynamoBreakerStore
from .stores.health_store import DynamoHealthStore
from .stores.jobs import JobStore
from .timeouts import BREAKER_RECOVERY, BREAKER_THRESHOLD, RECIPE_HEDGE_AFTER


def breaker_lookup(settings: Settings, store: JobStore) -> Callable[[str], CircuitBreaker]:
    """Each model's breaker, its state in the jobs table (shared by every invocation)."""
    config = BreakerConfig(failure_threshold=BREAKER_THRESHOLD.of(settings), recovery_s=BREAKER_RECOVERY.of(settings))
    return lambda model: CircuitBreaker(DynamoBreakerStore(store.table, settings.model_base_url, model), model, config)


def health_lookup(settings: Settings, store: JobStore) -> Callable[[str], DynamoHealthStore]:
    """Each model's measured health, in the jobs table (added to by every call, read by ``fastest``)."""
    return lambda model: DynamoHealthStore(
        store.table, settings.model_base_url, model, max_age_s=settings.model_health_max_age_s
    )


def fastest_first(settings: Settings, health_for: Callable[[str], DynamoHealthStore]) -> FastestFirst | None:
    """``RecipeRouting=fastest``: the candidates' health, read once per job (two reads each)."""
    if settings.recipe_routing != "fastest":
        return None
    return FastestFirst({m: health_for(m).read() for m in settings.recipe_models}, settings.recipe_expected_tokens)


def recipe_routes(settings: Settings, store: JobStore) -> Routes:
    """Where this job's recipe calls may go: the recipe model and its fallbacks, each behind its breaker and
    adding to its measured health, ordered by speed under ``RecipeRouting=fastest``, and hedged once when
    ``RecipeHedgeAfterMs`` is set."""
    health_for = health_lookup(settings, store)
    fastest = fastest_first(settings, health_for)
    after_ms = RECIPE_HEDGE_AFTER.of(settings)
    budget = hedge_budget(settings.model_base_url)
    return Routes(
        settings.recipe_models,
        breaker_for=breaker_lookup(settings, store),
        health_for=health_for,
        fastest=fastest,
        hedge=Hedge(after_ms, budget, fastest.health if fastest else {}) if after_ms else None,
    )


def image_routes(settings: Settings, store: JobStore) -> Routes:
    """Where this job's picture calls may go: the image model and its fallbacks, each behind its breaker."""
    return Routes(settings.image_models, breaker_for=breaker_lookup(settings, store))
