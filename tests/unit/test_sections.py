"""A recipe in sections, in process: the plan, the shared prompt prefix, the merge and its checks, what the
progress shows, and the cached prompt tokens providers report (read from their recorded streams)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from model_samples import long_recipe_for, recipe_for, section_doc

from chuixiang.errors import ErrorCode, StageError
from chuixiang.generation.recipe_format import parse_recipe
from chuixiang.generation.sections import (
    EXTRAS,
    IMAGE_PROMPT,
    OUTLINE_SECTION,
    Extras,
    Outline,
    Section,
    SectionStreams,
    StepsPart,
    fallback_image_prompt,
    merge,
    messages,
    outline_text,
    plan,
)
from chuixiang.upstream.chat_events import cached_prompt_tokens

from ..support.provider_corpus import recordings

Ranges = list[tuple[Section, StepsPart]]


def parts_of(recipe: dict[str, Any]) -> tuple[Outline, Ranges, Extras, str]:
    """``recipe`` as the sections would have written it."""
    outline = Outline.model_validate(section_doc(recipe, "outline"))
    ranges = [s for s in plan(outline) if s.core]
    steps = [(s, StepsPart.model_validate(section_doc(recipe, s.name))) for s in ranges]
    return outline, steps, Extras.model_validate(section_doc(recipe, EXTRAS)), recipe["imagePrompt"]


@pytest.mark.parametrize(
    ("titles", "ranges"),
    [(6, ["1-3", "4-6"]), (7, ["1-3", "4-5", "6-7"]), (8, ["1-3", "4-6", "7-8"]), (12, ["1-4", "5-8", "9-12"])],
)
def test_the_steps_split_in_two_or_three_even_ranges_then_the_degradable_sections(
    titles: int, ranges: list[str]
) -> None:
    outline = Outline.model_validate({**section_doc(recipe_for("菜"), "outline"), "stepTitles": ["步"] * titles})
    sections = plan(outline)
    assert [s.name for s in sections] == [*(f"steps:{r}" for r in ranges), EXTRAS, IMAGE_PROMPT]
    assert [s.core for s in sections] == [True] * len(ranges) + [False, False]


def test_every_call_repeats_one_prefix_and_differs_only_in_its_last_message() -> None:
    outline = outline_text(Outline.model_validate(section_doc(recipe_for("红烧肉"), "outline")))
    first = messages("红烧肉", OUTLINE_SECTION, None)
    later = [messages("红烧肉", s, outline) for s in plan(Outline.model_validate(json.loads(outline)))]
    steps, others = [m for m in later if "步" in m[-1]["content"]], [m for m in later if "步" not in m[-1]["content"]]
    assert len(steps) == 2 and len(others) == 2  # six steps: two ranges
    # Each kind repeats one prefix, identical bytes: the steps ranges theirs (a system prompt of their own, the dish,
    # the outline), the extras and the image prompt the outline call's start and the outline.
    assert all(m[:-1] == steps[0][:-1] for m in steps) and all(m[:-1] == others[0][:-1] for m in others)
    assert first[:-1] == others[0][:2] and steps[0][1:-1] == others[0][1:-1]
    assert len(steps[0][0]["content"]) < len(first[0]["content"]) / 2  # what every range repeats, and reserves
    assert len({m[-1]["content"] for m in later}) == len(later)


@pytest.mark.parametrize("recipe", [recipe_for("番茄炒蛋"), long_recipe_for("红烧肉")], ids=["six steps", "eight"])
def test_the_parts_merge_into_the_recipe_a_whole_answer_is(recipe: dict[str, Any]) -> None:
    merged = merge(*parts_of(recipe))
    whole = parse_recipe(json.dumps(section_doc(recipe, None), ensure_ascii=False))
    assert merged == whole


def test_dropped_extras_leave_pairings_and_nutrition_null_and_a_dropped_image_prompt_is_built() -> None:
    outline, steps, _, _ = parts_of(recipe_for("鱼香肉丝"))
    recipe = merge(outline, steps, None, None)
    assert recipe.pairings is None and recipe.nutrition is None
    assert recipe.imagePrompt == fallback_image_prompt("鱼香肉丝", outline.summary)
    assert "鱼香肉丝" in recipe.imagePrompt and outline.summary in recipe.imagePrompt


def test_a_whole_answer_still_needs_pairings_and_nutrition() -> None:
    doc = {**section_doc(recipe_for("菜"), None), "pairings": None}
    with pytest.raises(StageError, match="pairings is null"):
        parse_recipe(json.dumps(doc, ensure_ascii=False))


def _without(parts: Ranges, order: int) -> Ranges:
    return [(r, StepsPart(steps=[s for s in p.steps if s.order != order])) for r, p in parts]


@pytest.mark.parametrize(
    ("spoil", "why"),
    [
        (lambda o, s: (o, _without(s, 4)), "step orders"),  # a range wrote one step too few
        (lambda o, s: (o, [*s, (s[0][0], StepsPart(steps=s[0][1].steps[:1]))]), "step orders"),  # a step twice
        (
            lambda o, s: (o.model_copy(update={"stepTitles": [*o.stepTitles, "收汁"]}), s),
            "step orders",  # seven titles, six steps
        ),
        (
            lambda o, s: (
                o,
                [(r, StepsPart(steps=[x.model_copy(update={"text": "翻炒均匀。"}) for x in p.steps])) for r, p in s],
            ),
            "main ingredient",  # no step uses the main ingredients
        ),
    ],
    ids=["a step missing", "a step twice", "a title without its step", "no main ingredient in any step"],
)
def test_parts_that_do_not_agree_are_recipe_invalid(spoil: Any, why: str) -> None:
    outline, steps, extras, prompt = parts_of(recipe_for("宫保鸡丁"))
    outline, steps = spoil(outline, steps)
    with pytest.raises(StageError) as raised:
        merge(outline, steps, extras, prompt)
    assert raised.value.code is ErrorCode.RECIPE_INVALID and why in raised.value.detail


def test_an_ingredient_is_found_by_the_head_of_its_name() -> None:
    outline, steps, extras, prompt = parts_of(recipe_for("菜"))
    ingredients = outline.ingredients.model_copy(
        update={
            "main": [
                *outline.ingredients.main,
                outline.ingredients.main[0].model_copy(update={"name": "土鸡蛋（散养）"}),
            ]
        }
    )
    merge(outline.model_copy(update={"ingredients": ingredients}), steps, extras, prompt)  # "蛋液" in a step


def test_a_sections_answer_that_is_not_its_shape_names_the_section() -> None:
    with pytest.raises(StageError, match="section steps:1-3: steps"):
        Section.steps(1, 3).parse('{"steps": []}')
    with pytest.raises(StageError, match="section outline: stepTitles"):
        OUTLINE_SECTION.parse(json.dumps({**section_doc(recipe_for("菜"), "outline"), "stepTitles": ["a"]}))


class Reader:
    """A stream reader as the progress reporter reads it."""

    def __init__(self, text: str, first_text_at: float = 1.0) -> None:
        self.text, self.first_text_at = text, first_text_at
        self.reasoning_chars, self.completion_tokens = 0, None

    @property
    def content_chars(self) -> int:
        return len(self.text)

    def text_so_far(self) -> str:
        return self.text


def test_progress_shows_the_outline_first_then_every_step_in_order_whichever_range_wrote_it() -> None:
    recipe = recipe_for("蒜蓉西兰花")
    outline, steps, _, _ = parts_of(recipe)
    streams = SectionStreams()
    outline_json = json.dumps(section_doc(recipe, "outline"), ensure_ascii=False)
    streams.watcher("outline")(Reader(outline_json[: outline_json.index('"stepTitles"') + 16]))
    shown = streams.partial() or {}
    assert shown.get("name") == "蒜蓉西兰花" and "ingredients" in shown and shown.get("stepTitles") == []
    streams.ended("outline", outline)
    sections = plan(outline)
    streams.planned(sections)
    assert streams.partial() == outline.model_dump()  # the titles readable before any step
    later = json.dumps(section_doc(recipe, "steps:4-6"), ensure_ascii=False)
    # steps 4 and 5 written; the last of a list being written is not shown (it may still grow)
    streams.watcher("steps:4-6")(Reader(later[: later.rindex('{"order"')]))
    streams.ended("steps:1-3", steps[0][1])
    assert [s["order"] for s in (streams.partial() or {})["steps"]] == [1, 2, 3, 4]
    assert streams.section_states() == {
        "outline": "done",
        "steps:1-3": "done",
        "steps:4-6": "writing",
        EXTRAS: "waiting",
        IMAGE_PROMPT: "waiting",
    }
    assert streams.content_chars == len(outline_json[: outline_json.index('"stepTitles"') + 16]) + len(
        later[: later.rindex('{"order"')]
    )


def test_cached_prompt_tokens_as_providers_report_them() -> None:
    """Every recorded stream's usage: OpenAI's ``prompt_tokens_details.cached_tokens`` (xAI: 11 of 12 cached),
    DeepSeek's ``prompt_cache_hit_tokens``, or nothing said."""
    said = {r.name: cached_prompt_tokens(r.usage()) for r in recordings() if r.usage()}
    assert said["xai-grok-3-mini-reasoning.sse"] == 11
    assert said["deepseek-v4-flash-reasoning.sse"] == 0
    assert said["ollama-openai-compat.sse"] is None
    assert cached_prompt_tokens({"prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 30}) == 64
