"""Generate a recipe in sections (``RecipeSections=parallel``), over the same seam as a whole one.

The outline is routed first, as a whole recipe's call is: its model's breaker, early retries, fallbacks and
the job's one hedge. The sections then start together, each routed on its own to the model that wrote the
outline first (one model's style; its prompt cache holds the prefix they share), then the fallbacks. No
section hedges: the job's one hedge is the outline's, the part a user waits for first.

Every call stays inside one budget (:meth:`~chuixiang.deadline.Budget.within`): the outline and the slowest
section together end within ``RecipeTotalMs``, so the ladder above the stage holds in either mode. Each call
keeps its own first-content and idle limits. A core section that fails closes every other stream at once
and fails the stage with its code; a degradable one that fails, or is still writing when the budget ends,
is dropped (``degraded``).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import httpx
from pydantic import BaseModel

from ..deadline import Budget
from ..errors import StageError
from ..resilience.router import Routed, Routes
from ..schemas import RecipeMetrics, SectionReport
from ..upstream.endpoint import ModelEndpoint
from ..upstream.transport import Cancellation
from .progress import ProgressReporter
from .recipe import (
    AnswerRequest,
    Made,
    RecipeLimits,
    RecipeOutcome,
    answer_call,
    count_tokens,
    recipe_metrics,
    recipe_router,
)
from .recipe_format import Recipe
from .section_progress import SectionStreams
from .sections import (
    OUTLINE_SECTION,
    SECTION_HEADER,
    Extras,
    ImagePromptPart,
    Outline,
    Section,
    StepsPart,
    merge,
    messages,
    outline_text,
    plan,
)
from .stage import Generation, generate, stage_error

V = TypeVar("V", bound=BaseModel)


@dataclass
class _Part:
    """One section's routing: what it ended with, its calls' measurements, when it ran (ms into the stage)."""

    section: Section
    index: int  #: its place in the job's plan (the outline 0): the order it is reported in
    routed: Routed[BaseModel]
    made: list[Made] = field(default_factory=list)
    start_ms: int = 0
    end_ms: int = 0

    @property
    def value(self) -> BaseModel | None:
        return self.routed.result


def generate_recipe_in_sections(
    client: httpx.Client,
    endpoint: ModelEndpoint,
    limits: RecipeLimits,
    dish: str,
    budget: Budget,
    routes: Routes | None = None,
    progress: ProgressReporter | None = None,
) -> RecipeOutcome:
    """Write the recipe for ``dish`` in sections over ``routes`` (default: ``endpoint.model`` alone), within
    ``budget`` and the total limit; ``progress`` shows each section and the parts as they complete."""
    run = _SectionsRun(client, endpoint, limits, dish, routes or Routes((endpoint.model,)), progress)
    return run.run(budget.within(limits.total_ms))


class _SectionsRun:
    def __init__(
        self,
        client: httpx.Client,
        endpoint: ModelEndpoint,
        limits: RecipeLimits,
        dish: str,
        routes: Routes,
        progress: ProgressReporter | None,
    ) -> None:
        self.client, self.endpoint, self.limits, self.dish, self.routes = client, endpoint, limits, dish, routes
        self.started = time.monotonic()
        self.parts: list[_Part] = []
        self._lock = threading.Lock()
        #: Set when a core section failed: every other stream is closed at once.
        self.core_failed = Cancellation()
        self.streams = SectionStreams()
        self.stops = (self.core_failed, *((progress.cancellation,) if progress else ()))
        if progress:
            progress.watch(self.streams)

    def run(self, budget: Budget) -> RecipeOutcome:
        first = self._write(OUTLINE_SECTION, 0, None, self.routes, budget)
        if first.value is None:
            return self._ended(None, stage_error("RECIPE", first.routed.failure))
        outline = cast(Outline, first.value)
        sections = plan(outline)
        self.streams.planned(sections)
        routes, text = self._section_routes(first.routed.model), outline_text(outline)
        failure = None
        with ThreadPoolExecutor(max_workers=len(sections), thread_name_prefix="section") as pool:
            writing = [pool.submit(self._write, s, i, text, routes, budget) for i, s in enumerate(sections, 1)]
            try:
                for future in as_completed(writing):
                    part = future.result()
                    if part.section.core and part.value is None and failure is None:
                        failure = part.routed.failure
                        self.core_failed.cancel(f"the core section {part.section.name} failed")
            except BaseException:  # a section's own error (a bug, an AWS call): close the others, do not wait
                self.core_failed.cancel("a section raised")
                raise
        if failure is not None:
            return self._ended(None, stage_error("RECIPE", failure))
        try:
            prompt = next((p.imagePrompt for p in self._values(ImagePromptPart)), None)
            recipe = merge(outline, self._values(StepsPart), next(iter(self._values(Extras)), None), prompt)
        except StageError as exc:
            return self._ended(None, exc)
        return self._ended(recipe, None)

    def _write(self, section: Section, index: int, outline: str | None, routes: Routes, budget: Budget) -> _Part:
        """Route one section's calls (the outline's first, then each section on a thread of its own)."""
        part = _Part(section, index, Routed(None, None, None, (), 0), start_ms=self._ms())
        request = AnswerRequest(messages(self.dish, section, outline), section.parse, {SECTION_HEADER: section.name})
        call = answer_call(
            self.client,
            self.endpoint,
            self.limits,
            request,
            part.made,
            watch=self.streams.watcher(section.name),
            stops=self.stops,
        )
        part.routed = generate(recipe_router(routes, self.limits), call, budget)
        part.end_ms = self._ms()
        self.streams.ended(section.name, part.value, dropped=not section.core)
        with self._lock:
            self.parts.append(part)
        return part

    def _section_routes(self, outline_model: str | None) -> Routes:
        """The sections go first to the outline's model, then the others in order; no ``fastest`` (it predicts
        a whole recipe's time), no hedge (the outline had the job's one)."""
        ordered = self.routes.ordered()
        models = (outline_model, *(m for m in ordered if m != outline_model)) if outline_model else ordered
        return Routes(models, breaker_for=self.routes.breaker_for, health_for=self.routes.health_for)

    def _ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def _values(self, shape: type[V]) -> list[V]:
        """The answers of that shape the sections wrote (every range's steps; the extras, the image prompt)."""
        return [p.value for p in self.parts if isinstance(p.value, shape)]

    def _ended(self, recipe: Recipe | None, error: StageError | None) -> RecipeOutcome:
        return Generation(recipe, error, self._metrics())

    def _metrics(self) -> RecipeMetrics:
        """The stage's measurements: the outline's stream figures (what a user waits for first), every
        section's calls and tokens, and how each section went."""
        parts = sorted(self.parts, key=lambda p: p.index)
        m = recipe_metrics(parts[0].routed, parts[0].made)
        m.calls = [c.model_copy(update={"section": p.section.name}) for p in parts for c in p.routed.calls]
        m.attempts = sum(p.routed.attempts for p in parts)
        m.totalMs = self._ms()
        made = [one for p in parts for one in p.made]
        m.chunks = sum(c.chunks for _, c, _ in made)
        m.maxGapMs = max((c.max_gap_ms for _, c, _ in made), default=None)
        m.outputChars = sum(sum(len(x) for x in c.parts) + c.reasoning_chars for _, c, _ in made)
        answered = [c for c in m.calls if c.outcome == "ok"]
        m.promptTokens = _sum(c.promptTokens for c in answered)
        m.completionTokens = _sum(c.completionTokens for c in answered)
        count_tokens(m)
        m.sections = [_report(p) for p in parts]
        dropped = [p.section.name for p in parts if not p.section.core and p.value is None]
        m.degraded = dropped or None
        return m


def _sum(values: Any) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _outcome(part: _Part) -> str:
    if part.value is not None:
        return "ok"
    if not part.section.core:
        return "dropped"
    error = stage_error("RECIPE", part.routed.failure)
    return error.code.value if error else "failed"


def _report(part: _Part) -> SectionReport:
    latest = next((c for model, c, _ in reversed(part.made) if model == part.routed.model), None)
    return SectionReport(
        name=part.section.name,
        core=part.section.core,
        startMs=part.start_ms,
        endMs=part.end_ms,
        model=part.routed.model,
        outcome=_outcome(part),
        firstContentMs=latest.first_content_ms if latest else None,
    )
