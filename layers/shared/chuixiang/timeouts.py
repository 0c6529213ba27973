"""Every limit of the timeout ladder, declared once, and the rules derived from them.

A :class:`Limit` says everything the rest of the system needs to know about one
limit: its template parameter, the environment variable and settings attribute
that carry it into a function, its unit and default, the value the tests scale it
down to, and which limit must enclose it. ``settings.py`` builds its fields from
these declarations, ``chuixiang ladder`` checks and prints them (``--markdown`` is
the README table), and the tests' scaled parameter set is read from here, so none
of them repeats a number.

Adding a limit: declare it in :data:`LIMITS`, add the parameter (and the
environment variable of the function that uses it) to ``template.yaml``, and use
it. ``tests/test_limits.py`` fails when the template and the declaration disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Unit(StrEnum):
    MS = "ms"
    S = "s"

    def to_ms(self, value: float) -> float:
        return value * 1000 if self is Unit.S else value


class Margin(StrEnum):
    """How far inside its enclosing limit a limit must stay."""

    STRICT = "strict"  #: strictly smaller (by one unit)
    FINISH = "finish"  #: the enclosing function's finishing margin (see :func:`finish_margin_ms`)
    SAFETY = "safety"  #: :data:`SAFETY_MARGIN_S`, as between the worst-case path and the execution timeout


@dataclass(frozen=True)
class Limit:
    parameter: str  #: template parameter
    unit: Unit
    default: int  #: must equal the template's Default (a test checks)
    title: str  #: a few words: what it bounds
    meaning: str  #: the rule, for the README table
    env: str | None = None  #: environment variable carrying it into functions
    attr: str | None = None  #: ``Settings`` attribute
    functions: tuple[str, ...] = ()  #: function code dirs whose environment carries it ("*": Globals)
    scaled: int | None = None  #: value in the scaled-down test ladder (same parameter, same code path)
    inside: str | None = None  #: parameter of the limit that must enclose this one
    margin: Margin = Margin.STRICT
    inside_state: str | None = None  #: for a function Timeout: the Task state that encloses it
    minimum: int = 1  #: smallest valid value (settings validation)

    def of(self, settings: Any) -> int:
        """This limit's value in a ``Settings`` instance."""
        assert self.attr is not None, f"{self.parameter} is not carried into functions"
        return int(getattr(settings, self.attr))


#: A Task state outlives its Lambda by this much, so Lambda's own kill
#: (``Sandbox.Timedout``) is what fires first and the job records why.
STATE_TIMEOUT_MARGIN_S = 5
#: Share of a function's time kept back to parse, validate and write the result.
FINISH_MARGIN_FRACTION = 0.05
FINISH_MARGIN_MIN_MS = 500
#: The worst-case path through the state machine must leave this much of its timeout unused,
#: and the client must wait this much longer than the execution may run.
SAFETY_MARGIN_S = 5
#: A retry is only worth starting when the budget left holds a typical attempt:
#: ~90 s at the evening peak against the 140 s total, i.e. about two thirds.
TYPICAL_ATTEMPT_FRACTION = 2 / 3


RECIPE_IDLE = Limit(
    "RecipeIdleTimeoutMs", Unit.MS, 30_000, "stream idle",
    "longest silence before the first byte and between two reads "
    "(socket read timeout; any bytes, keep-alives included, reset it)",
    env="RECIPE_TEXT_IDLE_TIMEOUT_MS", attr="recipe_idle_timeout_ms", functions=("recipe",),
    scaled=1000, inside="RecipeTotalTimeoutMs", minimum=100)
RECIPE_TOTAL = Limit(
    "RecipeTotalTimeoutMs", Unit.MS, 140_000, "stream total",
    "whole generation, per attempt; capped by the Lambda's time left "
    f"− max({FINISH_MARGIN_MIN_MS} ms, {FINISH_MARGIN_FRACTION:.0%}) and the job's `deadlineAt`",
    env="RECIPE_TEXT_TIMEOUT_MS", attr="recipe_total_timeout_ms", functions=("recipe",),
    scaled=3000, inside="RecipeFunctionTimeout", margin=Margin.FINISH, minimum=500)
RECIPE_RETRY_WINDOW = Limit(
    "RecipeRetryWindowMs", Unit.MS, 20_000, "recipe retry window",
    "one retry, only for a 5xx/429/refused/reset-before-data within this long of the attempt start, "
    f"before content, if {TYPICAL_ATTEMPT_FRACTION:.0%} of the total still fits",
    env="RECIPE_RETRY_WINDOW_MS", attr="recipe_retry_window_ms", functions=("recipe",),
    scaled=500, inside="RecipeTotalTimeoutMs", minimum=0)
RECIPE_FUNCTION = Limit(
    "RecipeFunctionTimeout", Unit.S, 150, "recipe Lambda", "the recipe function's `Timeout`",
    env="RECIPE_FUNCTION_TIMEOUT", attr="recipe_function_timeout_s", functions=("submit",),
    scaled=5, inside_state="Recipe", minimum=2)
IMAGE_FUNCTION = Limit(
    "ImageFunctionTimeout", Unit.S, 100, "image Lambda", "the image function's `Timeout`",
    env="IMAGE_FUNCTION_TIMEOUT", attr="image_function_timeout_s", functions=("submit",),
    scaled=5, inside_state="Image", minimum=2)
IMAGE_RETRY_WINDOW = Limit(
    "ImageRetryWindowMs", Unit.MS, 15_000, "image retry window",
    "the image retries only a 5xx/429/refused within this long of the attempt start "
    "(up to 3 attempts, each needing half the budget it started with)",
    env="IMAGE_RETRY_WINDOW_MS", attr="image_retry_window_ms", functions=("image",),
    scaled=500, inside="ImageFunctionTimeout", margin=Margin.FINISH, minimum=0)
STATE_MACHINE = Limit(
    "StateMachineTimeout", Unit.S, 300, "state machine",
    "the whole execution; fixes each job's `deadlineAt` (execution start + this)",
    env="JOB_TIMEOUT_SECONDS", attr="job_timeout_s", functions=("*",),
    scaled=60, inside="ClientGiveUpSeconds", margin=Margin.SAFETY, minimum=10)
CLIENT_GIVE_UP = Limit(
    "ClientGiveUpSeconds", Unit.S, 360, "client gives up", "documented: the mini-program stops polling after this")

LIMITS: tuple[Limit, ...] = (
    RECIPE_IDLE, RECIPE_TOTAL, RECIPE_RETRY_WINDOW, RECIPE_FUNCTION,
    IMAGE_FUNCTION, IMAGE_RETRY_WINDOW, STATE_MACHINE, CLIENT_GIVE_UP,
)
BY_PARAMETER: dict[str, Limit] = {limit.parameter: limit for limit in LIMITS}


def scaled_parameters() -> dict[str, str]:
    """The scaled-down ladder the tests run (template parameter overrides)."""
    return {limit.parameter: str(limit.scaled) for limit in LIMITS if limit.scaled is not None}


def state_timeout_seconds(function_timeout_s: int) -> int:
    return function_timeout_s + STATE_TIMEOUT_MARGIN_S


def finish_margin_ms(function_budget_ms: float) -> float:
    return max(FINISH_MARGIN_MIN_MS, function_budget_ms * FINISH_MARGIN_FRACTION)


def required_margin_ms(limit: Limit, outer_ms: float) -> float:
    """How much room ``limit`` must leave inside its enclosing limit (in ms)."""
    if limit.margin is Margin.FINISH:
        return finish_margin_ms(outer_ms)
    if limit.margin is Margin.SAFETY:
        return SAFETY_MARGIN_S * 1000
    return limit.unit.to_ms(1)
