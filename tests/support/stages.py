"""Typed helpers that call a generation step the way its Lambda would, from the template's environment."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
from stack_template import Template

from chuixiang.deadline import Budget
from chuixiang.generation.image import ImageLimits, ImageOutcome, generate_image
from chuixiang.generation.recipe import RecipeOutcome
from chuixiang.generation.recipe_call import RecipeLimits
from chuixiang.generation.recipe_job import RecipeJob
from chuixiang.generation.recipe_modes import write_recipe
from chuixiang.resilience.breaker import CircuitBreaker
from chuixiang.resilience.calls import Routes
from chuixiang.resilience.fastest import FastestFirst
from chuixiang.resilience.health import HealthStore
from chuixiang.resilience.hedge import Hedge
from chuixiang.settings import Settings
from chuixiang.upstream.endpoint import ModelEndpoint
from chuixiang_local.loopback import loopback_client


def function_settings(template: Template, function: str, base_url: str) -> Settings:
    """A function's settings exactly as the template sets its environment (model URL replaced)."""
    return Settings.model_validate({**template.function_by_dir(function).env, "MODEL_BASE_URL": base_url})


Breakers = Callable[[str], CircuitBreaker | None] | None


def _none(model: str) -> None:
    return None


def run_recipe(
    template: Template,
    base_url: str,
    budget_ms: float,
    *,
    api_key: str | None = None,
    settings: Settings | None = None,
    client: httpx.Client | None = None,
    breaker_for: Breakers = None,
    health_for: Callable[[str], HealthStore | None] | None = None,
    fastest: FastestFirst | None = None,
    hedge: Hedge | None = None,
) -> tuple[RecipeOutcome, float]:
    """(outcome, elapsed seconds) of one recipe generation with a fresh budget (fallbacks from the settings;
    written whole or in sections as ``RECIPE_SECTIONS`` says, through the stage's own choice).

    The clock starts with the budget, after the HTTP client exists: the function builds its client in
    the init phase, and building one (20-40 ms of CPU, several times that on a busy machine) is not
    part of how late a limit is enforced."""
    settings = settings or function_settings(template, "recipe", base_url)
    endpoint = ModelEndpoint(settings.model_base_url, settings.recipe_model, api_key)
    limits = RecipeLimits.from_settings(settings)
    with client or loopback_client() as c:
        started = time.monotonic()
        routes = Routes(
            settings.recipe_models,
            breaker_for=breaker_for or _none,
            health_for=health_for or _none,
            fastest=fastest,
            hedge=hedge,
        )
        outcome = write_recipe(
            RecipeJob(c, endpoint, limits, "番茄炒蛋", Budget(budget_ms, None), routes),
            setting=settings.recipe_sections,
            max_streams=settings.recipe_max_streams,
        )
        elapsed = time.monotonic() - started
    return outcome, elapsed


def run_image(
    template: Template,
    base_url: str,
    budget_ms: float,
    *,
    settings: Settings | None = None,
    breaker_for: Breakers = None,
) -> tuple[ImageOutcome, float]:
    """(outcome, elapsed seconds) of one image generation with a fresh budget (clock as in :func:`run_recipe`)."""
    settings = settings or function_settings(template, "image", base_url)
    endpoint = ModelEndpoint(settings.model_base_url, settings.image_model, None)
    limits = ImageLimits.from_settings(settings)
    with loopback_client() as client:
        started = time.monotonic()
        routes = Routes(settings.image_models, breaker_for=breaker_for or _none)
        outcome = generate_image(client, endpoint, limits, "a dish", Budget(budget_ms, None), routes)
        elapsed = time.monotonic() - started
    return outcome, elapsed
