"""The recipe stage's one entry: choose how to write the recipe (``RecipeSections``), write it, say why.

``auto`` (the default) asks :mod:`.mode_choice` per job, from the health of the model the job goes to first;
``whole`` and ``parallel`` fix the mode (``parallel`` still sizes its steps sections from what was measured).
A recipe in sections whose sections fail *as sections* (the key's quota, an answer outside its section's shape, a
stall, parts that do not merge: :mod:`.sections` (`_yield`)) is written again whole when the stage's total limit leaves
a whole attempt its minimum time (``wholeAfter``): the user gets a recipe, later, never none.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from aws_lambda_powertools.metrics import MetricUnit

from ..deadline import Budget
from ..observability import dimensioned_metric, logger
from ..resilience.calls import Routes
from ..resilience.health import ModelHealth
from ..resilience.key_loans import Lender
from .call_figures import billed
from .mode_choice import OTHER_STREAMS, ModeChoice, choose
from .recipe import RecipeOutcome, generate_recipe
from .recipe_call import RecipeLimits
from .recipe_job import RecipeJob
from .sections import AbandonReason, most_ranges_reserved, sections_reservation, whole_reservation, write_in_sections
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
    # No plan reserves more than MAX_RESERVED_RATIO a whole answer's tokens: at most so many steps ranges.
    reserved = most_ranges_reserved(limits.max_tokens)
    return choose(
        health,
        model,
        max_streams=min(max_streams, OTHER_STREAMS + reserved) if reserved else 1,
        remaining_ms=min(budget.remaining_ms(), limits.total_ms),
        only=None if setting == "auto" else setting,
    )


def write_recipe(
    job: RecipeJob, *, setting: SectionsSetting = "auto", max_streams: int, lender: Lender | None = None
) -> RecipeOutcome:
    """The recipe for ``job.dish`` in the mode ``setting`` says (``auto``: the one predicted faster), within its
    budget and the total limit; the metrics say which mode wrote it and why. With a ``lender`` (the key's), a
    plan in sections borrows its extra streams and tokens first, and the job tells it whether the key refused a
    call; without one the plan takes ``max_streams`` as given (a bench, a test)."""
    job = job.within_total()
    choice = choose_mode(job.routes, job.limits, job.budget, setting, max_streams)
    if choice.mode == "parallel" and lender is not None:
        choice = borrowed(choice, lender, job.limits)
    logger.info("recipe mode", extra={"mode": choice.mode, "modeReason": choice.reason, "ranges": choice.ranges})
    try:
        outcome = _written(job, choice)
    except BaseException:
        if lender is not None:
            lender.give_back(refused=False)
        raise
    if lender is not None:
        lender.give_back(refused=any(c.status == 429 for c in outcome.metrics.calls))
    m = outcome.metrics
    chosen = {"mode": m.mode or choice.mode, "modeReason": m.modeReason or choice.reason, "modeBasis": choice.basis}
    return replace(outcome, metrics=m.model_copy(update=chosen))


def borrowed(choice: ModeChoice, lender: Lender, limits: RecipeLimits) -> ModeChoice:
    """``choice`` with the streams and tokens its key lends it: the plan's ranges, or fewer, or whole."""
    whole = whole_reservation(limits.max_tokens).total
    why = ""
    for ranges in range(choice.ranges, 0, -1):
        extra = sections_reservation(ranges).total - whole
        loan = lender.borrow(ranges + OTHER_STREAMS - 1, max(extra, 0))
        if loan.streams:
            fewer = f"; {ranges} of {choice.ranges} steps ranges" if ranges < choice.ranges else ""
            return replace(choice, ranges=ranges, reason=f"{choice.reason}; borrowed {loan.streams} streams{fewer}")
        why = loan.why
    return ModeChoice("whole", 0, f"{choice.reason}; no streams to borrow ({why}): written whole", basis="no_loan")


def _written(job: RecipeJob, choice: ModeChoice) -> RecipeOutcome:
    if choice.mode == "whole":
        return generate_recipe(job)
    ended = write_in_sections(job, choice)
    if ended.abandon is None:
        return ended.outcome
    failed = replace(ended.outcome, metrics=ended.outcome.metrics.model_copy(update={"modeReason": choice.reason}))
    return WholeAfter(job).written(failed, ended.abandon)


@dataclass(frozen=True)
class WholeAfter:
    """Writing the recipe whole after its sections failed as sections (:mod:`.sections` (`_yield`))."""

    job: RecipeJob  #: within the total limit: the time the sections left is the whole answer's

    def written(self, failed: RecipeOutcome, reason: AbandonReason) -> RecipeOutcome:
        """The recipe written whole when the time left holds a whole attempt (else the sections' failure
        stands). Every call of both is on the bill; ``wholeAfter`` says why."""
        left = self.job.budget.remaining_ms()
        detail = failed.metrics.mergeFailure or (failed.error.detail if failed.error else reason)
        if left < self.job.limits.retry.min_attempt_ms:
            logger.warning(
                "sections abandoned; no time left to write it whole",
                extra={"wholeAfter": reason, "detail": detail, "remaining_ms": round(left)},
            )
            return failed
        logger.warning(
            "sections abandoned: writing it whole",
            extra={"wholeAfter": reason, "detail": detail, "remaining_ms": round(left)},
        )
        dimensioned_metric("RecipeSectionsAbandoned", MetricUnit.Count, 1, Reason=reason)
        if self.job.progress is not None:
            self.job.progress.hold_partial()  # the parts shown stay until the whole answer shows more
        whole = generate_recipe(self.job)
        m, before = whole.metrics, failed.metrics
        both = billed(
            m.model_copy(
                update={
                    "calls": [*before.calls, *m.calls],
                    "attempts": m.attempts + before.attempts,
                    "totalMs": before.totalMs + m.totalMs,
                    "sections": before.sections,
                    "mergeFailure": before.mergeFailure,
                    "wholeAfter": reason,
                    "mode": "whole",
                    "modeReason": f"{before.modeReason or 'parallel'}; the sections were abandoned ({reason}: "
                    f"{detail}): written whole",
                }
            )
        )
        # The bill of both; the sections' answers were thrown away: wasted too.
        wasted = both.tokensWasted + sum(c.tokens for c in before.calls if c.outcome == "ok")
        m = both.model_copy(update={"tokensWasted": wasted})
        return Generation(whole.result, whole.error, m)
