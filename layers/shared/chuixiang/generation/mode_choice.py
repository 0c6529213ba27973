"""``RecipeSections=auto``: per job, write the recipe whole or in sections, whichever is predicted faster.

Neither mode always wins. One stream writes ~1,600 tokens at the model's speed: ~90 s at the evening peak. In
sections the stage takes the outline's head (name, main ingredients, step titles), then one more first-content
wait and the longest steps range: ~25 s at the peak when each stream writes at its own speed, as hosted APIs
batch requests. But a key whose provider caps its tokens per second shares that speed across its streams: there
the sections write no faster than one stream and pay a second first-content wait, so ``whole`` wins.

So the stage predicts both from what the model's health records measured (:class:`~..resilience.health.ModelHealth`:
the typical first content, one stream's writing speed, and how many streams' worth of writing the key gave a
job in sections) and takes ``parallel`` only when it wins by :data:`MARGIN`. With no recent measurement it
takes :data:`COLD_MODE` and says so; the job's calls then measure the model, so the next jobs choose.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ..resilience.health import ModelHealth

Mode = Literal["whole", "parallel"]

#: With nothing measured: ``parallel``. It is what the peak needs (~90 s → ~25 s), and on a capped key it loses
#: one job's few seconds (the streams share the key's speed and add one first-content wait) before the
#: measurement of that job sends the next ones ``whole``.
COLD_MODE: Mode = "parallel"
#: ``parallel`` must be predicted this much faster than ``whole``: it costs more requests and prompt tokens.
MARGIN = 0.15
#: Fewer steps sections are taken while they are predicted within this share of the fastest plan.
FEWER_STREAMS_WITHIN = 0.03
#: Streams of a job in sections besides its steps: the outline, the extras, the image prompt.
OTHER_STREAMS = 3


@dataclass(frozen=True)
class RecipeShape:
    """How a typical recipe's tokens split over the sections (the fake model's full-length recipe, tokenised
    as it streams it: 1,569 tokens, of them the outline 335 with its head 124, each of 8 steps ~140, the
    extras 87, the image prompt 116; checked against it by ``tests/unit/test_mode_choice.py``)."""

    tokens: int = 1600
    steps: int = 8
    head_share: float = 0.079
    outline_share: float = 0.213
    step_share: float = 0.09
    extras_share: float = 0.055
    image_prompt_share: float = 0.074


@dataclass(frozen=True)
class Measured:
    """The figures a prediction takes: typical first content (ms), one stream's writing speed (tokens/s), and
    the streams' worth of writing a key gives at once (None: not seen; taken as each stream at its own speed)."""

    first_content_ms: float
    tokens_per_s: float
    key_streams: float | None = None

    @classmethod
    def of(cls, health: ModelHealth | None) -> Measured | None:
        if health is None or not health.known:
            return None
        if not health.first_content_p50_ms or not health.tokens_per_s_p50:
            return None
        return cls(health.first_content_p50_ms, health.tokens_per_s_p50, health.key_streams_p50)


def whole_ms(m: Measured, shape: RecipeShape) -> float:
    """One stream: first content, then every token at one stream's speed."""
    return m.first_content_ms + shape.tokens / m.tokens_per_s * 1000


def parallel_ms(m: Measured, shape: RecipeShape, ranges: int) -> float:
    """The outline's head alone, then ``ranges`` steps sections, the extras and the image prompt at once, each
    after its own first content, every stream at ``min(1, key streams / streams open)`` of one stream's speed;
    the stage ends with its last stream (the outline's tail included)."""
    open_streams = ranges + OTHER_STREAMS
    share = 1.0 if m.key_streams is None else min(1.0, m.key_streams / open_streams)
    one, shared = m.tokens_per_s / 1000, m.tokens_per_s * share / 1000  # tokens per ms
    t = shape.tokens
    titles_at = m.first_content_ms + t * shape.head_share / one
    longest_range = math.ceil(shape.steps / ranges) * t * shape.step_share
    ends = (
        titles_at + m.first_content_ms + longest_range / shared,
        titles_at + m.first_content_ms + t * max(shape.extras_share, shape.image_prompt_share) / shared,
        titles_at + t * (shape.outline_share - shape.head_share) / shared,
    )
    return max(ends)


@dataclass(frozen=True)
class ModeChoice:
    """What ``auto`` (or ``parallel``) chose for a job: the mode, the steps ranges in sections, and why."""

    mode: Mode
    ranges: int
    reason: str
    whole_ms: float | None = None
    parallel_ms: float | None = None
    #: ``reason`` in a word, for a metric dimension and a query's ``stats … by``: :data:`BASES`.
    basis: str = "predicted"


#: Why a mode was chosen, in a word: the setting fixed it, the job may hold one stream, the model had no recent
#: measurement, the measurements predicted it, the key had no streams to lend (written whole).
BASES = ("configured", "one_stream", "unmeasured", "predicted", "no_loan")


#: Why a job was written whole when it may hold one stream only.
ONE_STREAM = "one stream: the job may open no other"


def most_ranges(max_streams: int, shape: RecipeShape) -> int:
    """The steps sections a job may hold beside its other streams (at least one, at most one a step)."""
    return max(1, min(shape.steps, max_streams - OTHER_STREAMS))


def best_ranges(m: Measured, shape: RecipeShape, max_streams: int) -> tuple[int, float]:
    """(ranges, predicted ms): the fewest steps sections predicted within :data:`FEWER_STREAMS_WITHIN` of the
    fastest plan the stream limit allows (more streams than that buy nothing worth their requests)."""
    plans = {k: parallel_ms(m, shape, k) for k in range(1, most_ranges(max_streams, shape) + 1)}
    fastest = min(plans.values())
    k = min(k for k, ms in plans.items() if ms <= fastest * (1 + FEWER_STREAMS_WITHIN))
    return k, plans[k]


def choose(
    health: ModelHealth | None,
    model: str,
    *,
    max_streams: int,
    remaining_ms: float,
    shape: RecipeShape | None = None,
    only: Mode | None = None,
) -> ModeChoice:
    """The mode of one job's recipe for ``model`` (``only``: the mode is fixed, ``RecipeSections`` whole or
    parallel: only the ranges are chosen). ``parallel`` when predicted faster than ``whole`` by :data:`MARGIN`,
    or when only it is predicted to finish in ``remaining_ms``."""
    shape = shape or RecipeShape()
    if only == "whole":
        return ModeChoice("whole", 0, "RecipeSections=whole", basis="configured")
    if max_streams == 1:
        return ModeChoice("whole", 0, ONE_STREAM, basis="one_stream")
    m = Measured.of(health)
    if m is None:
        mode = only or COLD_MODE
        why = "RecipeSections=parallel" if only else f"no recent measurement of {model}: {COLD_MODE}, the default"
        basis = "configured" if only else "unmeasured"
        return ModeChoice(mode, most_ranges(max_streams, shape), f"{why}; measured from this job on", basis=basis)
    ranges, parallel = best_ranges(m, shape, max_streams)
    whole = whole_ms(m, shape)
    if only == "parallel":
        return ModeChoice("parallel", ranges, "RecipeSections=parallel", whole, parallel, basis="configured")
    figures = f"predicted parallel {parallel / 1000:.0f} s ({ranges} steps sections), whole {whole / 1000:.0f} s"
    if parallel <= whole * (1 - MARGIN) or (whole > remaining_ms >= parallel):
        return ModeChoice("parallel", ranges, figures, whole, parallel)
    shared = f"; the key gave {m.key_streams:.1f} streams' worth at once" if m.key_streams is not None else ""
    return ModeChoice("whole", 0, figures + shared, whole, parallel)
