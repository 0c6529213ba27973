"""Typed helpers that call a generation step the way its Lambda would, from the template's environment."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from chuixiang.deadline import Budget
from chuixiang.generation.image import ImageLimits, ImageOutcome, generate_image
from chuixiang.generation.recipe import RecipeLimits, RecipeOutcome, generate_recipe
from chuixiang.settings import Settings
from chuixiang.stores.breaker import CircuitBreaker
from chuixiang.upstream.endpoint import ModelEndpoint
from chuixiang_local.template import Template


def function_settings(template: Template, function: str, base_url: str) -> Settings:
    """A function's settings exactly as the template sets its environment (model URL replaced)."""
    return Settings.model_validate({**template.function_by_dir(function).env, "MODEL_BASE_URL": base_url})


Breakers = Callable[[str], CircuitBreaker | None] | None


def run_recipe(template: Template, base_url: str, budget_ms: float, *, api_key: str | None = None,
               settings: Settings | None = None, client: httpx.Client | None = None,
               breaker_for: Breakers = None) -> tuple[RecipeOutcome, float]:
    """(outcome, elapsed seconds) of one recipe generation with a fresh budget (fallbacks from the settings)."""
    settings = settings or function_settings(template, "recipe", base_url)
    endpoint = ModelEndpoint(settings.model_base_url, settings.recipe_model, api_key)
    started = time.monotonic()
    with client or httpx.Client() as c:
        outcome = generate_recipe(c, endpoint, RecipeLimits.from_settings(settings), "番茄炒蛋",
                                  Budget(budget_ms, None), fallbacks=settings.recipe_models[1:],
                                  breaker_for=breaker_for)
    return outcome, time.monotonic() - started


def run_image(template: Template, base_url: str, budget_ms: float, *, settings: Settings | None = None,
              breaker_for: Breakers = None) -> tuple[ImageOutcome, float]:
    """(outcome, elapsed seconds) of one image generation with a fresh budget."""
    settings = settings or function_settings(template, "image", base_url)
    endpoint = ModelEndpoint(settings.model_base_url, settings.image_model, None)
    started = time.monotonic()
    with httpx.Client() as client:
        outcome = generate_image(client, endpoint, ImageLimits.from_settings(settings), "a dish",
                                 Budget(budget_ms, None), fallbacks=settings.image_models[1:],
                                 breaker_for=breaker_for)
    return outcome, time.monotonic() - started
