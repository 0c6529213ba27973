"""The outline read while it streams: which steps sections can start before it ends.

A steps section needs the dish's name, its main ingredients and its own step titles, nothing else. The outline
asks for them first (``sections.OUTLINE_INSTRUCTION``), so at the evening peak they are written ~4 s after the
outline's first content, ~10 s before its end: each steps section starts as soon as its titles are complete
(:class:`PipelinedSteps`), not after the whole outline. A model that writes the keys in another order still
works: its sections start when the outline ends, as before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic_core import from_json

from ..recipe_format import json_start, mend_text, strip_reasoning
from ._plan import Section, split_steps

TITLES = "stepTitles"


@dataclass(frozen=True)
class OutlineHead:
    """What of an outline being written the steps need: its name, main ingredients and the titles complete so
    far; ``final`` once the titles' array is closed (every title known)."""

    name: str
    main: list[Any]
    titles: tuple[str, ...]
    final: bool

    def text(self) -> str:
        """The head as the steps sections' prompt repeats it (compact JSON)."""
        doc = {"name": self.name, "main": self.main, TITLES: list(self.titles)}
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def outline_head(text: str) -> OutlineHead | None:
    """The head of the outline ``text`` streamed so far, once its name and main ingredients are complete and
    its titles have begun (None before, or when the model wrote the keys in another order)."""
    body = mend_text(strip_reasoning(text)[0])[0]
    start = json_start(body)
    if start < 0:
        return None
    try:
        doc = from_json(body[start:], allow_partial=True)  # an unfinished string or key is left out
    except ValueError:
        return None
    if not isinstance(doc, dict) or TITLES not in doc or not isinstance(doc[TITLES], list):
        return None
    before = list(doc)[: list(doc).index(TITLES)]  # keys before the titles: complete, as a key follows them
    name, main = doc.get("name"), _main(doc, before)
    if "name" not in before or not isinstance(name, str) or not name.strip() or not main:
        return None
    titles = tuple(t for t in doc[TITLES] if isinstance(t, str) and t.strip())
    return OutlineHead(name, main, titles, _array_closed(body[start:], TITLES))


def _main(doc: dict[str, Any], before: list[str]) -> list[Any] | None:
    """The main ingredients, written before the titles: flat (``main``) or inside ``ingredients``."""
    if "main" in before and isinstance(doc["main"], list):
        return doc["main"]
    ingredients = doc.get("ingredients") if "ingredients" in before else None
    main = ingredients.get("main") if isinstance(ingredients, dict) else None
    return main if isinstance(main, list) else None


def _array_closed(body: str, key: str) -> bool:
    """Whether the array value of the top-level ``key`` in the JSON text ``body`` has its closing bracket."""
    at = body.find(f'"{key}"')
    opened = body.find("[", at) if at >= 0 else -1
    if opened < 0:
        return False
    depth, in_string, escaped = 0, False, False
    for ch in body[opened:]:
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return True
    return False


class PipelinedSteps:
    """Which steps sections start as the titles arrive: ``groups`` ranges planned over ``expected`` steps, the
    longer ones first; each starts once its titles are complete, the last once every title is known. The ranges
    are the plan's, in order, whenever the titles are read (an outline with fewer titles than planned has fewer
    ranges); one with more spreads those left over the ranges left when its titles end."""

    def __init__(self, groups: int, expected: int) -> None:
        self.sizes = [s.last - s.first + 1 for s in split_steps(1, max(expected, groups), groups)]
        self.next_first = 1
        self.started: list[Section] = []

    @property
    def done(self) -> bool:
        return not self.sizes

    def ready(self, known: int, final: bool) -> list[Section]:
        """The sections that can start now that ``known`` titles are complete (``final``: that is all of them)."""
        new: list[Section] = []
        if final and known - self.next_first + 1 > sum(self.sizes):  # more titles than planned: spread them
            new += split_steps(self.next_first, known, len(self.sizes)) if self.sizes else []
            self.sizes, self.next_first = [], known + 1
        while self.sizes and self.next_first <= known:
            last = min(known, self.next_first + self.sizes[0] - 1)
            if not final and (len(self.sizes) == 1 or last < self.next_first + self.sizes[0] - 1):
                break  # its titles are not all written yet (the last range waits for every title)
            if final and len(self.sizes) == 1:
                last = known
            new.append(Section.steps(self.next_first, last))
            self.sizes.pop(0)
            self.next_first = last + 1
        if final:
            self.sizes = []
        self.started += new
        return new
