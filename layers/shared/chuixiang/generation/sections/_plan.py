"""What each call of a recipe in sections asks for (its messages, its token share) and how the parts merge."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, model_validator

from ...errors import ErrorCode, StageError
from ..recipe_format import (
    EXTRAS_DROPPED,
    Ingredients,
    NonEmpty,
    Nutrition,
    Pairings,
    Recipe,
    Step,
    Strict,
    checked_size,
    parse_json_answer,
    validated,
)

#: The request header naming the section a call writes (a gateway's logs and the fake model read it).
SECTION_HEADER = "X-Recipe-Section"
OUTLINE, EXTRAS, IMAGE_PROMPT = "outline", "extras", "imagePrompt"


class Outline(Strict):
    """The outline's answer. It is asked for flat, in the order the steps need it (``OUTLINE_INSTRUCTION``):
    ``main``, ``auxiliary`` and ``seasoning`` are the ingredients' groups; the nested form is taken too."""

    name: NonEmpty
    summary: str = ""
    ingredients: Ingredients
    stepTitles: list[NonEmpty] = Field(min_length=6, max_length=12)

    @model_validator(mode="before")
    @classmethod
    def _nest_ingredients(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "ingredients" in data or "main" not in data:
            return data
        groups = ("main", "auxiliary", "seasoning")
        rest = {k: v for k, v in data.items() if k not in groups}
        return {**rest, "ingredients": {g: data.get(g, []) for g in groups}}


class StepsPart(Strict):
    steps: list[Step] = Field(min_length=1)


class Extras(Strict):
    pairings: Pairings
    nutrition: Nutrition


class ImagePromptPart(Strict):
    imagePrompt: NonEmpty


SYSTEM_PROMPT = """你是一位中餐菜谱作者。一份菜谱分几部分写，每次只写用户要的那一部分，
只输出一个 JSON 对象，不要任何解释或代码块标记。
完整菜谱的结构：
{"name": 菜名, "summary": 40~80 字简介,
 "ingredients": {"main": [{"name": 食材, "amount": 用量}], "auxiliary": [...], "seasoning": [...]},
 "stepTitles": [6~12 个步骤标题，每个 4~8 字],
 "steps": [{"order": 1, "text": 60~160 字，写出用到的主料名}],
 "pairings": {"side": 配菜, "soup": 汤品, "staple": 主食, "drink": 饮品},
 "nutrition": {"caloriesKcal": 数字, "proteinG": 数字, "fatG": 数字, "carbsG": 数字},
 "imagePrompt": 80~120 个英文单词的成品图描述}"""


#: A steps range's system prompt: only what a step needs (its shape, its length, the main ingredients named). The
#: ranges share it, the dish and the outline's head as their prefix (a cache holds it for the next ranges); it is a
#: third of the full structure's, and eight ranges each repeating that would reserve more than the plan may
#: (:mod:`._tokens`).
STEPS_SYSTEM_PROMPT = """你是一位中餐菜谱作者，按给出的大纲写菜谱中的几步。
只输出一个 JSON 对象，不要任何解释或代码块标记：
{"steps": [{"order": 序号, "text": 60~160 字，写出用到的主料名}]}"""


@dataclass(frozen=True)
class Section:
    """One part of the recipe: its name (the header's value), whether the recipe needs it, and for a range
    of steps its first and last order (1-based, inclusive)."""

    name: str
    core: bool
    first: int = 0
    last: int = 0

    @classmethod
    def steps(cls, first: int, last: int) -> Section:
        return cls(f"steps:{first}-{last}", True, first, last)

    def instruction(self) -> str:
        """The last message of the request: the only part that differs between one job's calls."""
        if self.name == OUTLINE:
            return OUTLINE_INSTRUCTION
        if self.name == EXTRAS:
            return '只写搭配和营养：{"pairings", "nutrition"}'
        if self.name == IMAGE_PROMPT:
            return '只写成品图描述：{"imagePrompt"}'
        return (
            f'只写第 {self.first}~{self.last} 步：{{"steps": [{{"order": {self.first}, "text": …}}, …]}}，'
            "按大纲的步骤标题写"
        )

    def parse(self, text: str) -> BaseModel:
        """The section's answer, or ``RECIPE_INVALID`` naming the section."""
        shape: type[BaseModel] = (
            Outline
            if self.name == OUTLINE
            else Extras
            if self.name == EXTRAS
            else ImagePromptPart
            if self.name == IMAGE_PROMPT
            else StepsPart
        )
        try:
            return parse_json_answer(text, shape, mend=self.core)
        except StageError as exc:
            raise StageError(exc.code, f"section {self.name}: {exc.detail}") from exc


OUTLINE_SECTION = Section(OUTLINE, core=True)
#: The sections a recipe can go without: started with the first steps section.
DEGRADABLE = (Section(EXTRAS, core=False), Section(IMAGE_PROMPT, core=False))
#: The outline asks for its keys in the order the steps need them: the name, the ingredients (the main ones
#: first) and the step titles come first, so each steps section can start as soon as its titles are written
#: (``outline_stream``); the summary, which no section needs, last.
OUTLINE_INSTRUCTION = (
    '只写大纲，按这个顺序写键：{"name", "main": [主料], "stepTitles", '
    '"auxiliary": [辅料], "seasoning": [调料], "summary"}'
)


def split_steps(first: int, last: int, groups: int) -> list[Section]:
    """Steps ``first``..``last`` in ``groups`` ranges as even as they split, the longer ones first (a range
    that starts earlier has the time to write one step more)."""
    count = last - first + 1
    groups = max(1, min(groups, count))
    sections = []
    for g in range(groups):
        size = count // groups + (1 if g < count % groups else 0)
        sections.append(Section.steps(first, first + size - 1))
        first += size
    return sections


def plan(outline: Outline, groups: int | None = None) -> list[Section]:
    """The sections written after a whole ``outline``: its steps in ``groups`` ranges (default: 2 for 6 steps,
    3 for 7-12), then the degradable ones."""
    count = len(outline.stepTitles)
    steps = split_steps(1, count, groups or (2 if count <= 6 else 3))
    return [*steps, *DEGRADABLE]


def messages(dish: str, section: Section, outline_text: str | None) -> list[dict[str, str]]:
    """The request's messages: the system prompt (a steps range's own), the dish and (after it) the outline as the
    model wrote it, identical in every call of its kind, then the section's instruction."""
    system = STEPS_SYSTEM_PROMPT if section.first else SYSTEM_PROMPT
    shared = [{"role": "system", "content": system}, {"role": "user", "content": f"菜名：{dish}"}]
    if outline_text is not None:
        shared.append({"role": "assistant", "content": outline_text})
    return [*shared, {"role": "user", "content": section.instruction()}]


def fallback_image_prompt(name: str, summary: str) -> str:
    """The picture's prompt when the ``imagePrompt`` section was dropped: built from the name and summary."""
    described = f": {summary}" if summary else ""
    return (
        f"A realistic overhead food photograph of the finished Chinese dish {name}{described}. "
        "Served on a white plate on a wooden table, soft natural light, appetising, no text, no people."
    )


def _stem(ingredient: str) -> str:
    """The part of an ingredient's name a step will use: no qualifier in brackets; of a name of three or more
    characters its last two (五花肉 → 花肉, 番茄 → 番茄), as Chinese puts the head noun last."""
    name = ingredient.split("（")[0].split("(")[0].strip()
    return name[-2:] if len(name) >= 3 else name


def check_consistency(outline: Outline, steps: list[Step]) -> None:
    """The parts agree: one step per title, orders 1..n without a gap, every main ingredient in some step
    (by its name's head: a step says 鸡蛋 or 蛋液, not the outline's exact words)."""
    orders = [s.order for s in steps]
    if orders != list(range(1, len(outline.stepTitles) + 1)):
        raise StageError(
            ErrorCode.RECIPE_INVALID,
            f"step orders {orders} are not 1..{len(outline.stepTitles)} (one per title of the outline)",
        )
    text = "".join(s.text for s in steps)
    for ingredient in outline.ingredients.main:
        stem = _stem(ingredient.name)
        if stem and stem not in text and stem[-1:] not in text:
            raise StageError(ErrorCode.RECIPE_INVALID, f"main ingredient {ingredient.name} is in no step")


def in_range(section: Section, part: StepsPart) -> list[Step]:
    """``part``'s steps as orders of the whole recipe: a model that numbered its range from 1 (steps 1-3 for
    ``steps:4-6``) is renumbered when it wrote as many steps as the range has; anything else stands as written
    (and the consistency check says what is wrong)."""
    orders = [s.order for s in part.steps]
    size = section.last - section.first + 1
    if section.first > 1 and orders == list(range(1, size + 1)):
        return [s.model_copy(update={"order": s.order + section.first - 1}) for s in part.steps]
    return list(part.steps)


def merge(
    outline: Outline, parts: list[tuple[Section, StepsPart]], extras: Extras | None, image_prompt: str | None
) -> Recipe:
    """The recipe the parts make (the same JSON a whole answer is), validated as one is: ``extras`` None
    leaves pairings and nutrition null; ``image_prompt`` None builds one from the name and summary."""
    steps = sorted((s for section, part in parts for s in in_range(section, part)), key=lambda s: s.order)
    check_consistency(outline, steps)
    doc: dict[str, Any] = {
        "name": outline.name,
        "summary": outline.summary,
        "ingredients": outline.ingredients.model_dump(),
        "steps": [s.model_dump() for s in steps],
        "pairings": extras.pairings.model_dump() if extras else None,
        "nutrition": extras.nutrition.model_dump() if extras else None,
        "imagePrompt": image_prompt or fallback_image_prompt(outline.name, outline.summary),
    }
    return checked_size(validated(Recipe, doc, {EXTRAS_DROPPED: extras is None}))


def outline_text(outline: Outline) -> str:
    """The outline as the later calls repeat it (compact JSON: the same bytes in every call)."""
    return json.dumps(outline.model_dump(), ensure_ascii=False, separators=(",", ":"))
