"""One recipe stage's job in one value: what every way of writing a recipe (whole, in sections, whole after
sections) reads, built once by the recipe handler (or the canary, a bench, a test) and passed down.

Why: the same seven values travelled loose through five signatures (9, 8, 8, 7 and 6 parameters), and each
layer re-listed them in its own order. A frozen value is passed as it is; a stage narrows its time with
:meth:`RecipeJob.within`, a new value, never a changed one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import httpx

from ..deadline import Budget
from ..resilience.calls import Routes
from ..upstream.endpoint import ModelEndpoint
from .progress import ProgressReporter
from .recipe_call import RecipeLimits


@dataclass(frozen=True)
class RecipeJob:
    client: httpx.Client
    endpoint: ModelEndpoint
    limits: RecipeLimits
    dish: str
    #: The time the stage may spend (its function's remaining time, less the margins).
    budget: Budget
    #: The models to route over (the endpoint's model first; fallbacks, breakers, health, the hedge).
    routes: Routes
    #: Shows the job's progress and partial recipe as it is written (None: nobody watches, a bench or the canary).
    progress: ProgressReporter | None = None

    def within_total(self) -> RecipeJob:
        """The job within the recipe's total limit as well as its budget."""
        return replace(self, budget=self.budget.within(self.limits.total_ms))
