"""The recipe the model is asked for, and how its text becomes one.

Hard validation is only what the product cannot show without: the shape and
types, 6-12 steps, at least one main ingredient, an image prompt. Lengths are
prompt guidance, not rules, so a slightly chatty model does not fail a job.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, ValidationInfo, model_validator

from ..errors import ErrorCode, StageError
from ..redaction import redact_tree

NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Ingredient(Strict):
    name: NonEmpty
    amount: str = ""


class Ingredients(Strict):
    main: list[Ingredient] = Field(min_length=1)
    auxiliary: list[Ingredient] = Field(default_factory=list)
    seasoning: list[Ingredient] = Field(default_factory=list)


class Step(Strict):
    order: int = Field(ge=1)
    text: NonEmpty


class Pairings(Strict):
    side: str = ""
    soup: str = ""
    staple: str = ""
    drink: str = ""


class Nutrition(Strict):
    caloriesKcal: float = Field(ge=0)
    proteinG: float = Field(ge=0)
    fatG: float = Field(ge=0)
    carbsG: float = Field(ge=0)


#: Validation context of a recipe merged from sections whose degradable ``extras`` were dropped.
EXTRAS_DROPPED = "extrasDropped"


class Recipe(Strict):
    name: NonEmpty
    summary: str = ""
    ingredients: Ingredients
    steps: list[Step] = Field(min_length=6, max_length=12)
    #: Null only in a recipe written in sections whose ``extras`` were dropped (``degraded`` says so).
    pairings: Pairings | None
    nutrition: Nutrition | None
    imagePrompt: NonEmpty

    @model_validator(mode="after")
    def _extras_present(self, info: ValidationInfo) -> Recipe:
        if (self.pairings is None or self.nutrition is None) and not (info.context or {}).get(EXTRAS_DROPPED):
            missing = "pairings" if self.pairings is None else "nutrition"
            raise ValueError(f"{missing} is null")
        return self


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)


def strip_reasoning(text: str) -> tuple[str, int]:
    """``text`` without the ``<think>…</think>`` blocks some providers write into the content
    (an unclosed one runs to the end), and how many characters of reasoning were removed."""
    if "<think>" not in text:
        return text, 0
    kept = _THINK.sub("", text)
    return kept, len(text) - len(kept)


def json_start(text: str) -> int:
    """Where the JSON object in ``text`` begins (after a code fence's opening), or -1."""
    return text.find("{")


def extract_json_text(text: str) -> str:
    """Return the JSON object inside ``text``: fenced, or the outermost braces."""
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1)
    start, end = json_start(text), text.rfind("}")
    if start < 0 or end <= start:
        return text.strip()
    return text[start : end + 1]


#: The largest recipe kept: its JSON (UTF-8) goes into the job item and the cache item, and a DynamoDB
#: item holds 400 KB. The prompt asks for ~3 KB; a runaway answer is refused, not stored half-way.
RECIPE_MAX_BYTES = 64 * 1024


M = TypeVar("M", bound=BaseModel)


_SURROGATE = re.compile("[\ud800-\udfff]")


def mend_text(text: str) -> tuple[str, int]:
    """``text`` as UTF-8 can carry it, and how many characters were replaced. JSON allows a lone surrogate
    (``"\\ud83c"``, half of an emoji split by a model's tokenizer) and so does a Python string decoded from it,
    but UTF-8 does not: DynamoDB, a log line or the next request would fail on it. A pair split over two stream
    events is joined; a lone half becomes U+FFFD."""
    if not _SURROGATE.search(text):
        return text, 0
    mended = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return mended, mended.count("\ufffd") - text.count("\ufffd")


def mend_tree(value: Any) -> tuple[Any, int]:
    """Every string of decoded JSON through :func:`mend_text`, and how many characters were replaced in all."""
    if isinstance(value, str):
        return mend_text(value)
    if isinstance(value, list):
        items = [mend_tree(v) for v in value]
        return [v for v, _ in items], sum(n for _, n in items)
    if isinstance(value, dict):
        pairs = [(mend_tree(k), mend_tree(v)) for k, v in value.items()]
        return {k: v for (k, _), (v, _) in pairs}, sum(a + b for (_, a), (_, b) in pairs)
    return value, 0


def parse_json_answer(text: str, model: type[M], *, mend: bool = True) -> M:
    """Parse model output (the JSON object in it) into ``model`` or raise ``RECIPE_INVALID``. A character UTF-8
    cannot carry (a lone surrogate) is replaced (``mend``), or refuses the answer (a part the recipe can go
    without is better dropped than shown with a hole)."""
    candidate = extract_json_text(strip_reasoning(text)[0])
    try:
        decoded, replaced = mend_tree(json.loads(candidate))
    except json.JSONDecodeError as exc:
        raise StageError(ErrorCode.RECIPE_INVALID, f"not JSON: {exc.msg} at {exc.pos}") from exc
    if replaced and not mend:
        raise StageError(ErrorCode.RECIPE_INVALID, f"{replaced} character(s) UTF-8 cannot carry (a lone surrogate)")
    # Every string as decoded, redacted: a key the model wrote JSON-escaped is caught here, whole.
    return validated(model, redact_tree(decoded))


def validated(model: type[M], data: object, context: dict[str, object] | None = None) -> M:
    """``data`` as ``model``, or ``RECIPE_INVALID`` naming the first field that failed."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise StageError(ErrorCode.RECIPE_INVALID, f"{where or model.__name__}: {first['msg']}") from exc


def checked_size(recipe: Recipe) -> Recipe:
    """``recipe``, or ``RECIPE_INVALID`` when it is larger than :data:`RECIPE_MAX_BYTES`."""
    size = len(recipe.model_dump_json().encode())
    if size > RECIPE_MAX_BYTES:
        raise StageError(ErrorCode.RECIPE_INVALID, f"recipe of {size} bytes, over the {RECIPE_MAX_BYTES} kept")
    return recipe


def parse_recipe(text: str) -> Recipe:
    """Parse model output into a :class:`Recipe` or raise ``RECIPE_INVALID`` (also when it is larger
    than :data:`RECIPE_MAX_BYTES`)."""
    return checked_size(parse_json_answer(text, Recipe))


SYSTEM_PROMPT = """你是一位中餐菜谱作者。用户给出菜名，你只输出一个 JSON 对象，不要任何解释或代码块标记。
JSON 结构：
{"name": 菜名, "summary": 40~80 字简介,
 "ingredients": {"main": [{"name": 食材, "amount": 用量}], "auxiliary": [...], "seasoning": [...]},
 "steps": [{"order": 1, "text": 60~160 字}]  (6~12 步),
 "pairings": {"side": 配菜, "soup": 汤品, "staple": 主食, "drink": 饮品},
 "nutrition": {"caloriesKcal": 数字, "proteinG": 数字, "fatG": 数字, "carbsG": 数字},
 "imagePrompt": 80~120 个英文单词的成品图描述}"""
