"""What a limit of the timeout ladder is (:class:`Limit`) and the rules between limits: how far inside its
enclosing limit each must stay, and the margins the state machine and the functions keep. The limits
themselves are declared in :mod:`.timeouts`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Unit(StrEnum):
    MS = "ms"
    S = "s"
    CALLS = "calls"

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
    meaning: str  #: the rule, for the ladder table (docs/ladder.md)
    env: str | None = None  #: environment variable carrying it into functions
    attr: str | None = None  #: ``Settings`` attribute
    functions: tuple[str, ...] = ()  #: function code dirs whose environment carries it ("*": Globals)
    scaled: int | None = None  #: value in the scaled-down test ladder (same parameter, same code path)
    inside: tuple[str, ...] = ()  #: parameters of the limits that must enclose this one
    margin: Margin = Margin.STRICT
    inside_state: str | None = None  #: for a function Timeout: the Task state that encloses it
    timeout_of: str | None = None  #: for a function Timeout outside the state machine: its code dir
    minimum: int = 1  #: smallest valid value (settings validation)

    def of(self, settings: Any) -> int:
        """This limit's value in a ``Settings`` instance."""
        if self.attr is None:
            raise AttributeError(f"{self.parameter} is not carried into functions")
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
