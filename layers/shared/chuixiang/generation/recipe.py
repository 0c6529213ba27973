"""Generate a recipe: stream the model within the budget, retry only early transient failures, over the
routes (fallbacks, breakers, health, fastest first, the hedge). One call is :mod:`.recipe_call`; what the
calls measured, :mod:`.call_figures`."""

from __future__ import annotations

from ..resilience.calls import Routes
from ..resilience.router import Router
from ..schemas import RecipeMetrics
from ..upstream.chat_reader import Completion
from .call_figures import recipe_metrics
from .recipe_call import AnswerRequest, RecipeLimits, answer_call, to_answer, with_thinking
from .recipe_format import SYSTEM_PROMPT, Recipe, parse_recipe
from .recipe_job import RecipeJob
from .stage import Generation, generate, stage_error

__all__ = ["RecipeOutcome", "generate_recipe", "recipe_router", "to_recipe", "whole_messages"]

#: What a recipe generation returns: the recipe or its error, and the measurements of the job's ``recipe`` stage.
RecipeOutcome = Generation[Recipe, RecipeMetrics]


def whole_messages(dish: str) -> list[dict[str, str]]:
    """The recipe request's messages: the whole recipe in one answer."""
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": f"菜名：{dish}"}]


def to_recipe(completion: Completion) -> Recipe:
    """Turn a finished completion into a recipe or a classified failure."""
    return to_answer(with_thinking(completion), parse_recipe)


def generate_recipe(job: RecipeJob) -> RecipeOutcome:
    """Stream a recipe over ``job.routes`` (see :class:`Router` for fallbacks, breakers, health, fastest first and
    the hedge) within ``job.budget``; ``job.progress`` watches each call's stream, and follows the one that
    writes first when a hedge races two."""
    client, endpoint, limits, progress = job.client, job.endpoint, job.limits, job.progress
    request = AnswerRequest(whole_messages(job.dish), parse_recipe)
    call = answer_call(
        client,
        endpoint,
        limits,
        request,
        watch=progress.watch if progress else None,
        # Closed when the job stops running this stage (a hedge race's loser is closed by the router).
        stops=(progress.cancellation,) if progress else (),
    )
    routed = generate(recipe_router(job.routes, limits), call, job.budget)
    return Generation(routed.result, stage_error("RECIPE", routed.failure), recipe_metrics(routed))


def recipe_router(routes: Routes, limits: RecipeLimits) -> Router:
    """The recipe stage's router over ``routes``: its retry rule, each attempt within the total limit."""
    return Router(
        routes, limits.retry, "chat.completions", attempt_limit_ms=limits.total_ms, lease_s=limits.total_ms / 1000
    )
