"""The sections of a recipe written in parts: each one's routing and timing (:class:`Part`), and the ``recipe``
stage's figures made from them (the outline's stream, every call, each section's report)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ...resilience.calls import Routed
from ...schemas import RecipeMetrics, SectionReport
from ...upstream.chat_reader import Completion
from ...upstream.failures import Cancelled
from ..call_figures import billed, recipe_metrics
from ..stage import stage_error
from ._plan import Section


@dataclass
class Part:
    """One section's routing: what it ended with, its calls' measurements, when it ran (ms into the stage)."""

    section: Section
    index: int  #: its place in the job's plan (the outline 0): the order it is reported in
    routed: Routed[BaseModel]
    start_ms: int = 0
    end_ms: int = 0
    writer: str | None = None  #: the model of its latest call that wrote (in a hedge race, the first to write)

    def wrote(self, model: str) -> None:
        self.writer = model

    def answered(self) -> Completion | None:
        """What the answering model's last call read."""
        latest = self.routed.latest(self.routed.model)
        return latest.report.completion if latest else None

    @property
    def value(self) -> BaseModel | None:
        return self.routed.result


def parts_metrics(parts: list[Part], total_ms: int) -> RecipeMetrics:
    """The stage's measurements: the outline's stream figures (what a user waits for first), every
    section's calls and tokens, and how each section went."""
    parts = sorted(parts, key=lambda p: p.index)
    calls = [c.model_copy(update={"section": p.section.name}) for p in parts for c in p.routed.calls]
    read = [r.report.completion for p in parts for r in p.routed.records if r.report.completion is not None]
    answered = [c for c in calls if c.outcome == "ok"]
    dropped = [p.section.name for p in parts if not p.section.core and p.value is None]
    outline = recipe_metrics(parts[0].routed)
    return billed(
        outline.model_copy(
            update={
                "calls": calls,
                "attempts": sum(p.routed.attempts for p in parts),
                "totalMs": total_ms,
                "chunks": sum(c.chunks for c in read),
                "maxGapMs": max((c.max_gap_ms for c in read), default=None),
                "outputChars": sum(c.output_chars for c in read),
                "promptTokens": _sum(c.promptTokens for c in answered),
                "completionTokens": _sum(c.completionTokens for c in answered),
                "sections": [_report(p) for p in parts],
                "degraded": dropped or None,
            }
        )
    )


def _sum(values: Any) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _outcome(part: Part) -> str:
    if part.value is not None:
        return "ok"
    if isinstance(part.routed.failure, Cancelled):  # closed because another core section failed first
        return "cancelled"
    if not part.section.core:
        return "dropped"
    error = stage_error("RECIPE", part.routed.failure)
    return error.code.value if error else "failed"


def _report(part: Part) -> SectionReport:
    latest = part.answered()
    return SectionReport(
        name=part.section.name,
        core=part.section.core,
        startMs=part.start_ms,
        endMs=part.end_ms,
        model=part.routed.model,
        outcome=_outcome(part),
        firstContentMs=latest.first_content_ms if latest else None,
    )
