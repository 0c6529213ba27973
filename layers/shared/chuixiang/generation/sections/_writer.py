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
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, replace
from typing import TypeVar, cast

from pydantic import BaseModel

from ...deadline import Budget
from ...errors import StageError
from ...resilience.calls import Routed, Routes
from ...settings import Settings
from ...upstream.failures import UpstreamError
from ...upstream.watchdog import Cancellation
from ..mode_choice import OTHER_STREAMS, ModeChoice, RecipeShape, most_ranges
from ..recipe import RecipeOutcome, recipe_router
from ..recipe_call import AnswerRequest, answer_call
from ..recipe_format import Recipe
from ..recipe_job import RecipeJob
from ..stage import Generation, generate, stage_error
from ..stream_sharing import StreamSharing
from ._outline import PipelinedSteps, outline_head
from ._parts import Part, parts_metrics
from ._plan import (
    DEGRADABLE,
    OUTLINE,
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
)
from ._progress import SectionStreams
from ._tokens import section_max_tokens
from ._yield import AbandonReason, abandon_reason

V = TypeVar("V", bound=BaseModel)


@dataclass(frozen=True)
class SectionsEnd:
    """What a run in sections ended with, and why the stage should write the recipe whole instead (None: it
    should not: the recipe was written, or the failure would fail a whole answer too)."""

    outcome: RecipeOutcome
    abandon: AbandonReason | None


def write_in_sections(job: RecipeJob, choice: ModeChoice | None = None) -> SectionsEnd:
    """Write the recipe for ``job.dish`` in sections over ``job.routes``, within its budget and the total limit,
    in ``choice.ranges`` steps sections (default: as many as the default stream limit allows); ``job.progress``
    shows each section and the parts as they complete. The end says why to write whole instead when its sections
    failed as sections."""
    run = _SectionsRun(job)
    ranges = choice.ranges if choice else most_ranges(default_max_streams(), RecipeShape())
    outcome = run.run(job.within_total().budget, ranges)
    return SectionsEnd(outcome, run.abandon)


def default_max_streams() -> int:
    """``RecipeMaxStreams``' default (the settings', which a test holds equal to the template's)."""
    return int(Settings.model_fields["recipe_max_streams"].default)


#: How often the outline's text is read for the titles written so far (a parse of at most ~1 KB).
HEAD_POLL_S = 0.02


class _SectionsRun:
    def __init__(self, job: RecipeJob) -> None:
        self.client, self.endpoint, self.limits, self.dish, self.routes = (
            job.client,
            job.endpoint,
            job.limits,
            job.dish,
            job.routes,
        )
        limits, progress = job.limits, job.progress
        #: A section refused for the key's quota is retried by the ordinary rule only (once, early): the key being
        #: full is the stage's reason to write whole on the job's own stream, not to wait beside the outline.
        self.section_limits = replace(limits, retry=replace(limits.retry, quota_attempts=0))
        self.started = time.monotonic()
        self.parts: list[Part] = []
        self._lock = threading.Lock()
        #: Set when a core section failed: every other stream is closed at once.
        self.core_failed = Cancellation()
        self.streams = SectionStreams()
        self.stops = (self.core_failed, *((progress.cancellation,) if progress else ()))
        self.sharing = StreamSharing(self.started)
        self.pending: list[Future[Part]] = []
        self.degradable_started = False
        self._next_index = 0
        self._outline: Part | None = None
        #: Why the sections failed as sections (a whole answer may still succeed), set by the first core failure.
        self.abandon: AbandonReason | None = None
        if progress:
            progress.watch(self.streams)

    def run(self, budget: Budget, ranges: int) -> RecipeOutcome:
        pool = ThreadPoolExecutor(max_workers=ranges + OTHER_STREAMS + 1, thread_name_prefix="section")
        try:
            return self._run(pool, budget, ranges)
        except BaseException:  # a section's own error (a bug, an AWS call): close the others, do not wait
            self.core_failed.cancel("a section raised")
            raise
        finally:
            pool.shutdown(wait=not self.core_failed.is_set())

    def _run(self, pool: ThreadPoolExecutor, budget: Budget, ranges: int) -> RecipeOutcome:
        steps = PipelinedSteps(ranges, RecipeShape().steps)
        outline_call = pool.submit(self._write, OUTLINE_SECTION, None, self.routes, budget)
        while not futures_wait([outline_call], timeout=HEAD_POLL_S).done:  # sections start as titles come
            self._start_ready(pool, steps, budget)
        first = outline_call.result()
        if first.value is None:
            self.core_failed.cancel("the outline failed")
            futures_wait(self.pending)  # closed at once: their calls are counted with the stage's
            self.abandon = abandon_reason(first.routed.failure)
            return self._ended(None, stage_error("RECIPE", first.routed.failure))
        outline = cast(Outline, first.value)
        if (reader := self.streams.reader(OUTLINE)) is not None:
            self.sharing.outline_at(reader)
        self._start(pool, steps.ready(len(outline.stepTitles), final=True), outline_text(outline), budget)
        failure = self._wait_sections()
        if failure is not None:
            self.abandon = abandon_reason(failure)
            return self._ended(None, stage_error("RECIPE", failure))
        try:
            recipe = merge(outline, self._ranges(), next(iter(self._values(Extras)), None), self._image_prompt())
        except StageError as exc:
            outcome = self._ended(None, exc)
            self.abandon = "merge"
            return replace(outcome, metrics=outcome.metrics.model_copy(update={"mergeFailure": exc.detail}))
        self._record_sharing(first.routed.model)
        return self._ended(recipe, None)

    def _start_ready(self, pool: ThreadPoolExecutor, steps: PipelinedSteps, budget: Budget) -> None:
        """Start the steps sections whose titles the outline has written so far (and, with the first of them,
        the degradable ones)."""
        reader = self.streams.reader(OUTLINE)
        if reader is None or steps.done:
            return
        self.sharing.outline_at(reader)
        head = outline_head(reader.text_so_far())
        if head is not None and (ready := steps.ready(len(head.titles), head.final)):
            self._start(pool, ready, head.text(), budget)

    def _start(self, pool: ThreadPoolExecutor, sections: list[Section], outline: str, budget: Budget) -> None:
        if sections and not self.degradable_started:
            sections, self.degradable_started = [*sections, *DEGRADABLE], True
        if not sections:
            return
        routes = self._section_routes()
        self.streams.planned(sections)
        self.pending += [pool.submit(self._write, s, outline, routes, budget) for s in sections]

    def _wait_sections(self) -> UpstreamError | None:
        """Wait for every section; the first core failure closes the others at once and is the stage's."""
        failure = None
        for future in as_completed(self.pending):
            part = future.result()
            if part.section.core and part.value is None and failure is None:
                failure = part.routed.failure
                self.core_failed.cancel(f"the core section {part.section.name} failed")
        return failure

    def _write(self, section: Section, outline: str | None, routes: Routes, budget: Budget) -> Part:
        """Route one section's calls (the outline's first, then each section on a thread of its own)."""
        with self._lock:
            index, self._next_index = self._next_index, self._next_index + 1
        part = Part(section, index, Routed(None, None, None, (), 0), start_ms=self._ms())
        if section.name == OUTLINE:
            self._outline = part
        request = AnswerRequest(
            messages(self.dish, section, outline),
            section.parse,
            {SECTION_HEADER: section.name},
            alone=False,
            max_tokens=min(section_max_tokens(section), self.limits.max_tokens),
        )
        call = answer_call(
            self.client,
            self.endpoint,
            self.limits,
            request,
            watch=self.streams.watcher(section.name),
            stops=self.stops,
            wrote=part.wrote,
        )
        part.routed = generate(recipe_router(routes, self.section_limits), call, budget)
        part.end_ms = self._ms()
        self.streams.ended(section.name, part.value, dropped=not section.core)
        with self._lock:
            self.parts.append(part)
        return part

    def _outline_writer(self) -> str | None:
        """The model whose outline call has written (in a hedge race, the one that wrote first)."""
        return self._outline.writer if self._outline else None

    def _section_routes(self) -> Routes:
        """The sections go first to the model writing the outline, then the others in order; no ``fastest``
        (it predicts a whole recipe's time), no hedge (the outline had the job's one)."""
        writer = self._outline_writer()
        ordered = self.routes.ordered()
        models = (writer, *(m for m in ordered if m != writer)) if writer else ordered
        return Routes(models, breaker_for=self.routes.breaker_for, health_for=self.routes.health_for)

    def _record_sharing(self, model: str | None) -> None:
        """Add what this job measured of its model to its health: one stream's speed (the outline's, while it
        wrote alone) and how many streams' worth of writing its key gave the sections at once."""
        health = self.routes.health_for(model) if model else None
        observation = self.sharing.observation(self._section_speeds())
        if health is not None and observation is not None:
            health.observe(observation)

    def _section_speeds(self) -> list[tuple[float, float, float]]:
        """(writing start, end, chars/s) of each section's answering call, in seconds from the stage's start."""
        spans = []
        for part in self.parts:
            if part.section.name == OUTLINE or part.value is None:
                continue
            c = part.answered()
            if c is None or c.first_content_ms is None or c.total_ms <= c.first_content_ms:
                continue
            chars = c.content_chars
            begin = part.end_ms - (c.total_ms - c.first_content_ms)
            spans.append((begin / 1000, part.end_ms / 1000, chars / ((c.total_ms - c.first_content_ms) / 1000)))
        return spans

    def _ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def _values(self, shape: type[V]) -> list[V]:
        """The answers of that shape the sections wrote (every range's steps; the extras, the image prompt)."""
        return [p.value for p in self.parts if isinstance(p.value, shape)]

    def _ranges(self) -> list[tuple[Section, StepsPart]]:
        return [(p.section, p.value) for p in self.parts if isinstance(p.value, StepsPart)]

    def _image_prompt(self) -> str | None:
        return next((p.imagePrompt for p in self._values(ImagePromptPart)), None)

    def _ended(self, recipe: Recipe | None, error: StageError | None) -> RecipeOutcome:
        return Generation(recipe, error, parts_metrics(self.parts, self._ms()))
