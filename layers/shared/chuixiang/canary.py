"""The canary: the recipe request to each candidate model on a schedule, with production's generation code,
as the same per-model metrics as real traffic (``Source=canary``), so ``RecipeRouting=fastest`` has fresh
figures for every model, the ones users are not sent to included."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from aws_lambda_powertools.metrics import MetricUnit

from .deadline import Budget
from .generation.call_figures import tokens_per_second
from .generation.recipe import generate_recipe
from .generation.recipe_call import RecipeLimits
from .generation.recipe_job import RecipeJob
from .observability import logger, metrics
from .resilience.calls import Routes
from .route_wiring import health_lookup
from .schemas import CanaryEvent, CanaryProbe, CanaryResult
from .settings import get_settings
from .stage_report import call_metrics, recipe_model_metrics
from .steps import http_client, job_store
from .stores.secrets import model_api_key
from .upstream.endpoint import ModelEndpoint


def run_canary(event: CanaryEvent, remaining_ms: Callable[[], float]) -> CanaryResult:
    """Probe each model with the recipe request, all at once, each inside the recipe limits and this
    invocation's time; emit the same per-model metrics as real traffic. No breaker: a canary must
    reach a model whose breaker is open, that is how its recovery shows."""
    settings = get_settings()
    models = event.models or list(settings.canary_model_list)
    limits = RecipeLimits.from_settings(settings)
    key = model_api_key(settings)
    budget = Budget(remaining_ms(), None)
    health_for = health_lookup(settings, job_store(settings))

    def probe(model: str) -> CanaryProbe:
        endpoint = ModelEndpoint(settings.model_base_url, model, key)
        routes = Routes((model,), health_for=health_for)
        outcome = generate_recipe(RecipeJob(http_client(), endpoint, limits, event.dish, budget, routes))
        m = outcome.metrics
        call_metrics("Recipe", m.calls, Source="canary")
        recipe_model_metrics(m, valid=outcome.result is not None, Source="canary")
        return CanaryProbe(
            model=model,
            valid=outcome.result is not None,
            code=outcome.error.code.value if outcome.error else None,
            firstContentMs=m.firstContentMs,
            totalMs=m.totalMs,
            tokensPerSecond=tokens_per_second(m),
        )

    with ThreadPoolExecutor(max_workers=max(1, len(models))) as pool:
        probes = list(pool.map(probe, models))
    for p in probes:
        logger.info("canary probe", extra=p.model_dump())
    metrics.add_metric(name="CanaryProbes", unit=MetricUnit.Count, value=len(probes))
    metrics.add_metric(name="CanaryInvalid", unit=MetricUnit.Count, value=sum(not p.valid for p in probes))
    return CanaryResult(dish=event.dish, probes=probes)
