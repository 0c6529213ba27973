"""Derived limits shared by the functions and the ladder check.

These formulas are the reason no extra knob exists for, say, the Recipe state's
TimeoutSeconds: it is computed from the function's Timeout here, by the submit
stage at run time (``TimeoutSecondsPath``) and by ``chuixiang ladder`` when it
checks a configuration, so the two cannot disagree.
"""

from __future__ import annotations

#: A Task state outlives its Lambda by this much, so Lambda's own kill
#: (``Sandbox.Timedout``) is what fires first and the job records why.
STATE_TIMEOUT_MARGIN_S = 5

#: Share of a function's time kept back to parse, validate and write the result.
FINISH_MARGIN_FRACTION = 0.05
FINISH_MARGIN_MIN_MS = 500

#: A retry is only worth starting when the budget left holds a typical attempt:
#: the seed measured ~90 s at peak against a 140 s limit, i.e. about two thirds.
TYPICAL_ATTEMPT_FRACTION = 2 / 3


def state_timeout_seconds(function_timeout_s: int) -> int:
    return function_timeout_s + STATE_TIMEOUT_MARGIN_S


def finish_margin_ms(function_budget_ms: float) -> float:
    return max(FINISH_MARGIN_MIN_MS, function_budget_ms * FINISH_MARGIN_FRACTION)
