"""What each call of a recipe asks a provider to reserve: its prompt and its ``max_tokens``.

Providers that count tokens per minute count them when a request is admitted, as its prompt plus its
``max_tokens`` (OpenAI, Azure), whatever the answer then writes. A whole recipe's call asks for
``RecipeMaxTokens`` (3,000) to write ~1,600. A section asking for as much would reserve 3,000 to write 90, and a
job of eleven calls ~37,600 where a whole answer reserves ~3,300: a key's minute would hold a few jobs in sections
where it holds ten whole. So each section asks for what it writes, measured on the typical recipe
(:class:`~.mode_choice.RecipeShape`), times :data:`MARGIN` plus :data:`FLOOR` (a long step, a chatty model); a
section cut short at its ``max_tokens`` is an answer outside its shape, and the stage writes the recipe whole
(:mod:`._yield`). A plan in sections reserves at most :data:`MAX_RESERVED_RATIO` what a whole answer
reserves (:func:`fits`): fewer, longer steps ranges, or whole.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..mode_choice import OTHER_STREAMS, RecipeShape
from ..progress import CHARS_PER_TOKEN
from ..recipe_format import SYSTEM_PROMPT as WHOLE_SYSTEM_PROMPT
from ._plan import (
    EXTRAS,
    IMAGE_PROMPT,
    OUTLINE,
    OUTLINE_INSTRUCTION,
    STEPS_SYSTEM_PROMPT,
    Section,
    split_steps,
)
from ._plan import SYSTEM_PROMPT as SECTIONS_SYSTEM_PROMPT

#: A section asks for this many times what it typically writes…
MARGIN = 2.0
#: …plus this many tokens.
FLOOR = 64
#: A plan in sections reserves at most this many times what a whole answer reserves (prompt + max_tokens).
MAX_RESERVED_RATIO = 2.5
#: A dish's name and the framing of each message, in tokens (a prompt's few tokens beyond its text).
DISH_AND_FRAMING = 24


def _tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def section_max_tokens(section: Section, shape: RecipeShape | None = None) -> int:
    """What ``section`` asks for: what it typically writes (a steps range: its steps), with the margin."""
    shape = shape or RecipeShape()
    if section.name == OUTLINE:
        share = shape.outline_share
    elif section.name == EXTRAS:
        share = shape.extras_share
    elif section.name == IMAGE_PROMPT:
        share = shape.image_prompt_share
    else:
        share = shape.step_share * (section.last - section.first + 1)
    return math.ceil(shape.tokens * share * MARGIN) + FLOOR


@dataclass(frozen=True)
class Reservation:
    """What a plan reserves at admission, in tokens, all its calls: prompts and ``max_tokens``."""

    prompt: int
    max_tokens: int

    @property
    def total(self) -> int:
        return self.prompt + self.max_tokens


def whole_reservation(max_tokens: int) -> Reservation:
    """One whole answer: the system prompt and the dish, and ``RecipeMaxTokens``."""
    return Reservation(_tokens(len(WHOLE_SYSTEM_PROMPT)) + DISH_AND_FRAMING, max_tokens)


def sections_reservation(ranges: int, shape: RecipeShape | None = None) -> Reservation:
    """A job in sections with ``ranges`` steps ranges over the typical recipe's steps: the outline, then each
    range, the extras and the image prompt, each repeating the system prompt, the dish and the outline (a steps
    range: its head) before its instruction."""
    shape = shape or RecipeShape()
    system = _tokens(len(SECTIONS_SYSTEM_PROMPT)) + DISH_AND_FRAMING
    steps_system = _tokens(len(STEPS_SYSTEM_PROMPT)) + DISH_AND_FRAMING
    outline = math.ceil(shape.tokens * shape.outline_share)
    head = math.ceil(shape.tokens * shape.head_share)
    steps = split_steps(1, shape.steps, ranges)
    prompts = system + _tokens(len(OUTLINE_INSTRUCTION))  # the outline's call
    prompts += sum(steps_system + head + DISH_AND_FRAMING for _ in steps)
    prompts += (OTHER_STREAMS - 1) * (system + outline + DISH_AND_FRAMING)
    outline_section = Section(OUTLINE, core=True)
    others = (Section(EXTRAS, core=False), Section(IMAGE_PROMPT, core=False))
    asked = sum(section_max_tokens(s, shape) for s in (outline_section, *steps, *others))
    return Reservation(prompts, asked)


def fits(ranges: int, max_tokens: int, shape: RecipeShape | None = None) -> bool:
    """Whether ``ranges`` steps ranges reserve at most :data:`MAX_RESERVED_RATIO` a whole answer's reservation."""
    whole = whole_reservation(max_tokens).total
    return sections_reservation(ranges, shape).total <= MAX_RESERVED_RATIO * whole


def most_ranges_reserved(max_tokens: int, shape: RecipeShape | None = None) -> int:
    """The most steps ranges a plan may have within :data:`MAX_RESERVED_RATIO` (0: not even one fits)."""
    shape = shape or RecipeShape()
    return max((k for k in range(1, shape.steps + 1) if fits(k, max_tokens, shape)), default=0)
