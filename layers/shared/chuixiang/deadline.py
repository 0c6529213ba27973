"""Deadline arithmetic: how long an attempt may run, given every enclosing limit.

An attempt's budget is the smallest of its own limit, what the Lambda has left
minus a finishing margin, and what the job has left before ``deadlineAt``. The
deadline is kept on the monotonic clock so a wall-clock jump cannot stretch it.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from datetime import datetime

from .clock import now_utc
from .limit_rules import finish_margin_ms


@dataclass(frozen=True)
class Deadline:
    at: float  #: time.monotonic() value
    bound_by: str  #: which limit is the tightest: "total", "lambda" or "job"
    budget_ms: float

    def remaining_ms(self) -> float:
        return (self.at - time.monotonic()) * 1000


class Budget:
    """What a Lambda invocation may spend; hands out per-attempt deadlines."""

    def __init__(self, lambda_remaining_ms: float, job_deadline_at: datetime | None) -> None:
        self.started = time.monotonic()
        self.margin_ms = finish_margin_ms(lambda_remaining_ms)
        self.lambda_end = self.started + (lambda_remaining_ms - self.margin_ms) / 1000
        self.job_end = self.started + (job_deadline_at - now_utc()).total_seconds() if job_deadline_at else None
        self.total_end: float | None = None  #: set by :meth:`within`: one total limit over many calls

    def within(self, total_ms: float) -> Budget:
        """This budget, ending also ``total_ms`` from now: a stage whose calls run one after another and side
        by side (the recipe's sections) shares one total limit, so the ladder above it still holds."""
        out = copy.copy(self)
        end = time.monotonic() + total_ms / 1000
        out.total_end = end if self.total_end is None else min(end, self.total_end)  # never past an earlier one
        return out

    def remaining_ms(self) -> float:
        ends = [self.lambda_end] + [end for end in (self.job_end, self.total_end) if end is not None]
        return (min(ends) - time.monotonic()) * 1000

    def attempt(self, total_ms: float | None) -> Deadline:
        now = time.monotonic()
        limits = {"lambda": self.lambda_end}
        own = now + total_ms / 1000 if total_ms is not None else None
        totals = [end for end in (own, self.total_end) if end is not None]
        if totals:
            limits["total"] = min(totals)
        if self.job_end is not None:
            limits["job"] = self.job_end
        bound_by = min(limits, key=lambda k: limits[k])
        at = limits[bound_by]
        return Deadline(at=at, bound_by=bound_by, budget_ms=(at - now) * 1000)
