"""What a waiting user sees of a recipe written in sections: each section's state and the complete parts.

The outline comes first (name, summary, ingredients, step titles), readable long before any step: at the
evening peak about 20 s into the job, where a whole recipe shows its ingredients only as the one stream
reaches them. The steps follow as their sections write them, in order of the steps, whichever range is
written first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, cast

from pydantic import BaseModel, TypeAdapter, ValidationError

from ...schemas import PartialRecipe, PartialStep
from ..progress import StreamState, partial_recipe
from ._outline import outline_head
from ._plan import OUTLINE, Outline, Section, StepsPart


def outline_so_far(text: str) -> dict[str, Any]:
    """What of an outline being written is complete: as asked for (flat, the name, main ingredients and titles
    first), its name, main ingredients and the titles written so far; written nested, its complete fields."""
    head = outline_head(text)
    if head is None:
        return dict(partial_recipe(text) or {})
    try:
        shown = dict(_SHOWN.validate_python({"name": head.name, "ingredients": {"main": head.main}}))
        return {**shown, "stepTitles": list(head.titles)}
    except ValidationError:  # main ingredients of another shape: the titles alone
        return {"name": head.name, "stepTitles": list(head.titles)}


_SHOWN = TypeAdapter(PartialRecipe)


class SectionStreams:
    """The sections' streams seen as one by the :class:`~.progress.ProgressReporter`: the counts summed over
    each section's current call, the partial recipe put together from the outline and the steps."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._readers: dict[str, StreamState] = {}
        self._states: dict[str, str] = {OUTLINE: "waiting"}
        self._outline: Outline | None = None
        self._steps: dict[int, PartialStep] = {}

    def planned(self, sections: list[Section]) -> None:
        with self._lock:
            self._states.update((s.name, "waiting") for s in sections)

    def watcher(self, name: str) -> Callable[[StreamState], None]:
        """What the section's calls hand their reader to (a retry's replaces the failed call's)."""

        def watch(reader: StreamState) -> None:
            with self._lock:
                self._readers[name] = reader
                self._states[name] = "writing"

        return watch

    def reader(self, name: str) -> StreamState | None:
        """The reader of ``name``'s current call (None before it sent its request)."""
        with self._lock:
            return self._readers.get(name)

    def ended(self, name: str, value: BaseModel | None, dropped: bool = False) -> None:
        """``name`` is done with ``value`` (None: it failed; ``dropped``: the recipe goes without it)."""
        with self._lock:
            self._states[name] = "done" if value is not None else "dropped" if dropped else "failed"
            if isinstance(value, Outline):
                self._outline = value
            elif isinstance(value, StepsPart):
                self._steps.update((s.order, PartialStep(order=s.order, text=s.text)) for s in value.steps)

    # --- StreamState -------------------------------------------------------------------------

    def _current(self) -> list[StreamState]:
        with self._lock:
            return list(self._readers.values())

    @property
    def content_chars(self) -> int:
        return sum(r.content_chars for r in self._current())

    @property
    def reasoning_chars(self) -> int:
        return sum(r.reasoning_chars for r in self._current())

    @property
    def completion_tokens(self) -> int | None:
        """The sum when every section's provider reports usage while streaming, else None (then estimated)."""
        counts = [r.completion_tokens for r in self._current()]
        return sum(c for c in counts if c is not None) if counts and None not in counts else None

    @property
    def first_text_at(self) -> float | None:
        times = [r.first_text_at for r in self._current() if r.first_text_at is not None]
        return min(times) if times else None

    def text_so_far(self) -> str:
        return ""  # not one text: see partial()

    # --- SectionedStream ---------------------------------------------------------------------

    def section_states(self) -> dict[str, str]:
        with self._lock:
            return dict(self._states)

    def partial(self) -> PartialRecipe | None:
        """The outline (whole once parsed, else what its stream has complete) and every complete step."""
        with self._lock:
            outline, steps = self._outline, dict(self._steps)
            writing = {n: r for n, r in self._readers.items() if self._states.get(n) == "writing"}
        shown: dict[str, Any] = {}
        if outline is not None:
            shown = outline.model_dump()
        elif OUTLINE in writing:
            shown = outline_so_far(writing[OUTLINE].text_so_far())
        for name, reader in writing.items():
            if name.startswith("steps:"):
                for step in (partial_recipe(reader.text_so_far()) or {}).get("steps", []):
                    steps.setdefault(step["order"], step)
        if steps:
            shown["steps"] = [steps[order] for order in sorted(steps)]
        return cast(PartialRecipe, shown) if shown else None
