"""``RecipeSections=auto``'s rule in milliseconds: what it predicts from a model's health, what it chooses, and the
pieces it stands on (the outline read while it streams, the ranges planned, the key streams a job measures)."""

from __future__ import annotations

import json

import pytest
from model_samples import long_recipe_for, section_doc, token_pieces

from chuixiang.generation.mode_choice import (
    COLD_MODE,
    Measured,
    RecipeShape,
    best_ranges,
    choose,
    parallel_ms,
    whole_ms,
)
from chuixiang.generation.sections import Outline, PipelinedSteps, Section, StepsPart, in_range, outline_head
from chuixiang.generation.stream_sharing import StreamSharing, most_at_once
from chuixiang.resilience.health import ModelHealth, Observation, counters, health_of

#: The peak as the write-up measured one stream: first content 6.2 s, ~18 tokens/s.
PEAK = Measured(first_content_ms=6_200, tokens_per_s=18.0)
OFF_PEAK = Measured(first_content_ms=3_000, tokens_per_s=60.0)
#: A key capped at one stream's speed over all its streams.
CAPPED = Measured(first_content_ms=2_000, tokens_per_s=18.0, key_streams=1.0)


def test_the_shape_is_the_fake_models_full_length_recipe_as_it_streams_it() -> None:
    recipe, shape = long_recipe_for("红烧肉"), RecipeShape()

    def tokens(section: str | None) -> int:
        return len(token_pieces(json.dumps(section_doc(recipe, section), ensure_ascii=False)))

    whole = tokens(None)
    head = {"name": recipe["name"], "main": recipe["ingredients"]["main"], "stepTitles": recipe["stepTitles"]}
    assert len(recipe["steps"]) == shape.steps
    for share, measured in [
        (shape.head_share, len(token_pieces(json.dumps(head, ensure_ascii=False)))),
        (shape.outline_share, tokens("outline")),
        (shape.step_share, tokens("steps:1-8") / 8),
        (shape.extras_share, tokens("extras")),
        (shape.image_prompt_share, tokens("imagePrompt")),
    ]:
        assert share == pytest.approx(measured / whole, abs=0.005)


def test_the_prediction_in_milliseconds() -> None:
    shape = RecipeShape()
    assert whole_ms(PEAK, shape) == pytest.approx(6_200 + 1600 / 18 * 1000)  # ~95 s
    # head 126 tokens (7.0 s), first content again, one step of 144 tokens (8.0 s): 6.2 + 7.0 + 6.2 + 8.0
    assert parallel_ms(PEAK, shape, 8) == pytest.approx(6_200 + 126.4 / 0.018 + 6_200 + 144 / 0.018, rel=1e-6)
    # two steps a range: one more step's writing
    assert parallel_ms(PEAK, shape, 4) - parallel_ms(PEAK, shape, 8) == pytest.approx(144 / 0.018, rel=1e-6)
    # a capped key: eleven streams share one stream's speed, so each range writes eleven times slower
    assert parallel_ms(CAPPED, shape, 8) > whole_ms(CAPPED, shape)


@pytest.mark.parametrize(
    ("measured", "mode", "ranges"),
    [(PEAK, "parallel", 8), (OFF_PEAK, "parallel", 8), (CAPPED, "whole", 0)],
    ids=["peak", "off-peak", "capped key"],
)
def test_auto_chooses_the_faster_mode(measured: Measured, mode: str, ranges: int) -> None:
    choice = choose(_health(measured), "m", max_streams=11, remaining_ms=140_000)
    assert (choice.mode, choice.ranges) == (mode, ranges), choice.reason
    assert "predicted parallel" in choice.reason


def test_fewer_ranges_when_the_key_gives_fewer_streams() -> None:
    """A key that gives three streams' worth: eight ranges (eleven streams) would each write at 3/11 of the speed;
    four ranges of two steps (seven streams, each at 3/7) are as fast with four requests fewer: the plan takes
    the fewest within 3 % of the fastest."""
    three = Measured(6_200, 18.0, key_streams=3.0)
    k, ms = best_ranges(three, RecipeShape(), 11)
    plans = [parallel_ms(three, RecipeShape(), r) for r in range(1, 9)]
    assert k == 4 and ms == plans[3] <= min(plans) * 1.03


def test_with_nothing_measured_the_default_and_why() -> None:
    choice = choose(ModelHealth(), "gpt-x", max_streams=11, remaining_ms=140_000)
    assert choice.mode == COLD_MODE == "parallel" and choice.ranges == 8
    assert choice.reason == "no recent measurement of gpt-x: parallel, the default; measured from this job on"
    assert choose(ModelHealth(), "m", max_streams=5, remaining_ms=1).ranges == 2  # the stream limit bounds it


def test_a_fixed_setting_is_obeyed_and_only_the_ranges_chosen() -> None:
    assert choose(_health(CAPPED), "m", max_streams=11, remaining_ms=140_000, only="parallel").mode == "parallel"
    assert choose(_health(PEAK), "m", max_streams=11, remaining_ms=140_000, only="whole").mode == "whole"


def test_parallel_when_only_it_finishes_in_the_time_left() -> None:
    """Within the margin, but whole would not finish in the time left: sections."""
    close = Measured(1_000, 18.0, key_streams=1.5)  # sections barely faster on this key
    shape = RecipeShape()
    _, parallel = best_ranges(close, shape, 11)
    whole = whole_ms(close, shape)
    assert whole * (1 - 0.15) < parallel < whole, (parallel, whole)
    assert choose(_health(close), "m", max_streams=11, remaining_ms=140_000).mode == "whole"
    assert choose(_health(close), "m", max_streams=11, remaining_ms=(parallel + whole) / 2).mode == "parallel"


def _health(m: Measured) -> ModelHealth:
    """A health record whose typical figures are ``m``'s."""
    return ModelHealth(
        known=True,
        samples=10,
        first_content_p50_ms=m.first_content_ms,
        tokens_per_s_p50=m.tokens_per_s,
        key_streams_p50=m.key_streams,
    )


def test_a_stores_record_gives_the_typical_figures_its_buckets_hold() -> None:
    """What the jobs table's counters say of the peak and of a capped key: the middle of each median's bucket."""
    seen = [Observation(first_content_ms=6_200, tokens_per_s=18.0, valid=True)] * 3 + [Observation(key_streams=1.0)]
    counts: dict[str, int] = {}
    for o in seen:
        for name in counters(o):
            counts[name] = counts.get(name, 0) + 1
    m = Measured.of(health_of([counts], 0.0, 3600))
    assert m == Measured(first_content_ms=7_500, tokens_per_s=17.5, key_streams=0.75)
    assert choose(health_of([counts], 0.0, 3600), "m", max_streams=11, remaining_ms=140_000).mode == "whole"
    assert Measured.of(health_of([counts], 4000.0, 3600)) is None  # older than the maximum age: nothing


def test_the_outline_head_as_it_streams() -> None:
    text = json.dumps(section_doc(long_recipe_for("红烧肉"), "outline"), ensure_ascii=False)
    titles_at = text.index('"stepTitles"')
    assert outline_head(text[: titles_at - 5]) is None  # the main ingredients still being written
    third = text.index('"', text.index("打散鸡蛋") + 4)  # the closing quote of the third title
    head = outline_head(text[: third + 1])
    assert head is not None and head.titles == ("洗切主料", "调好料汁", "打散鸡蛋") and not head.final
    assert head.main == long_recipe_for("红烧肉")["ingredients"]["main"]
    done = outline_head(text[: text.index('"auxiliary"')])
    assert done is not None and len(done.titles) == 8 and done.final
    assert Outline.model_validate_json(text).ingredients.auxiliary  # the flat answer nests as the recipe does
    nested = json.dumps({"name": "菜", "summary": "…", "ingredients": {"main": [{"name": "蛋", "amount": "1"}]}})
    assert outline_head(nested) is None  # no titles: the sections wait for the outline's end


def test_ranges_start_as_their_titles_are_written() -> None:
    steps = PipelinedSteps(groups=5, expected=8)  # 2, 2, 2, 1, 1
    assert [s.name for s in steps.ready(1, final=False)] == []
    assert [s.name for s in steps.ready(3, final=False)] == ["steps:1-2"]
    assert [s.name for s in steps.ready(7, final=False)] == ["steps:3-4", "steps:5-6", "steps:7-7"]
    assert [s.name for s in steps.ready(8, final=True)] == ["steps:8-8"] and steps.done
    fewer = PipelinedSteps(groups=2, expected=8)
    assert [s.name for s in fewer.ready(6, final=True)] == ["steps:1-4", "steps:5-6"]
    more = PipelinedSteps(groups=3, expected=8)
    assert [s.name for s in more.ready(12, final=True)] == ["steps:1-4", "steps:5-8", "steps:9-12"]


def test_a_range_numbered_from_one_is_renumbered_when_its_count_matches() -> None:
    part = StepsPart.model_validate({"steps": [{"order": 1, "text": "甲"}, {"order": 2, "text": "乙"}]})
    assert [s.order for s in in_range(Section.steps(4, 5), part)] == [4, 5]
    assert [s.order for s in in_range(Section.steps(4, 6), part)] == [1, 2]  # two of three: left for the check


class _Reader:
    def __init__(self, first_text_at: float) -> None:
        self.first_text_at, self.content_chars = first_text_at, 0


def test_key_streams_from_one_job() -> None:
    """The outline wrote 120 characters alone in its first 2 s (60/s); then eight sections wrote at once, each
    at 7.5 characters/s (a capped key: one stream's worth) or at 60 (each its own)."""
    clock = iter([1.0, 3.0])
    sharing = StreamSharing(started=0.0, clock=lambda: next(clock))
    reader = _Reader(first_text_at=1.0)
    sharing.outline_at(reader)  # type: ignore[arg-type]  # what outline_at reads of a stream's state
    reader.content_chars = 120
    sharing.outline_at(reader)  # type: ignore[arg-type]
    capped = sharing.observation([(4.0, 20.0, 7.5)] * 8)
    own = sharing.observation([(4.0, 6.0, 60.0)] * 8)
    assert capped is not None and capped.key_streams == 1.0 and capped.tokens_per_s == pytest.approx(50.0)
    assert own is not None and own.key_streams == 8.0
    assert most_at_once([(0, 2, 1), (1, 3, 1), (2, 4, 1)]) == 2  # one ends as the next begins


def test_a_job_admitted_with_one_stream_is_written_whole_whatever_was_measured() -> None:
    """A job that may hold one stream only is written whole, and says so."""
    from chuixiang.generation.mode_choice import ONE_STREAM, choose

    choice = choose(None, "m", max_streams=1, remaining_ms=600_000)
    assert (choice.mode, choice.ranges, choice.reason) == ("whole", 0, ONE_STREAM)
