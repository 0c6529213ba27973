"""What a waiting user can be shown while the model writes: progress and the finished part of the recipe.

A recipe takes about 90 s to stream (1,600 tokens at 18 tokens/s). The reader
already holds everything needed to show how far it is: the characters so far,
the usage when the provider reports it, and the text itself, whose completed
fields (name, summary, ingredients, the finished steps) can be parsed long
before the end.

Nothing here runs on the read loop. :class:`ProgressReporter` is a thread that
wakes every ``ProgressIntervalMs``, reads the current reader's counters (plain
attribute reads), parses the partial text with pydantic-core's partial JSON mode
and hands the result to a ``write`` callable (a conditional DynamoDB update).
A failed or slow write is logged and ignored; stopping the reporter never waits
for it.

The write is also how the stage learns that nobody will read the recipe: it
applies only while the job is RUNNING in the recipe stage, so when it does not
apply (the execution was stopped or timed out, the reconciler failed the job)
the reporter sets its :class:`Cancellation` and the model's connection is closed
at once. So that this is learned within one interval even while the model sends
nothing new (waiting for its first content), an unchanged state is written again
each interval.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from pydantic import TypeAdapter, ValidationError
from pydantic_core import from_json

from ..clock import iso, now_utc
from ..observability import logger
from ..schemas import PartialRecipe, Progress
from ..upstream.watchdog import Cancellation
from .recipe_format import RECIPE_MAX_BYTES, json_start, mend_text, strip_reasoning

#: Characters per token of a recipe (Chinese text, JSON punctuation and an English image prompt):
#: a 1,600-token recipe is about 2,000 characters. Used only while the provider reports no usage.
CHARS_PER_TOKEN = 1.2
#: Below 100 until the recipe is validated: the last tokens can still fail it.
MAX_STREAMING_PERCENT = 99
#: No ETA before the model has written this long (the first tokens' rate says little).
MIN_RATE_WINDOW_S = 0.5


_PARTIAL = TypeAdapter(PartialRecipe)
_SHOWN = tuple(PartialRecipe.__annotations__)


def partial_recipe(text: str) -> PartialRecipe | None:
    """The fields of ``text`` (a recipe being streamed) that can no longer change.

    JSON is written in order, so a value is complete once something follows it:
    every top-level field but the last one, and every step but the last one of a
    ``steps`` array still being written. A string or number at the end of the
    text may still grow, so it is never shown.
    """
    body = mend_text(strip_reasoning(text)[0])[0]
    start = json_start(body)
    if start < 0:
        return None
    try:
        doc = from_json(body[start:], allow_partial="trailing-strings")
    except ValueError:
        return None
    if not isinstance(doc, dict) or not doc:
        return None
    keys = list(doc)
    candidate: dict[str, Any] = {k: doc[k] for k in keys[:-1] if k in _SHOWN}
    last = keys[-1]
    if last == "steps" and isinstance(doc[last], list):
        candidate["steps"] = doc[last][:-1]
    for _ in range(len(_SHOWN)):
        try:
            shown = _PARTIAL.validate_python(candidate) or None
            # Past the size a recipe may have, it will be refused: stop showing it (the item has a limit).
            return shown if len(_PARTIAL.dump_json(shown or {})) <= RECIPE_MAX_BYTES else None
        except ValidationError as exc:  # drop what does not fit and keep the rest
            for bad in {e["loc"][0] for e in exc.errors() if e["loc"]}:
                candidate.pop(str(bad), None)
    return None


def shown_size(partial: PartialRecipe | None) -> tuple[int, int]:
    """How much of a recipe a partial shows: (its steps, its other fields); more of either is more to read."""
    if not partial:
        return (0, 0)
    fields = {k: v for k, v in partial.items() if v}
    return (len(partial.get("steps") or []), len(fields))


class StreamState(Protocol):
    """What the reporter reads from the stream reader of the current attempt."""

    @property
    def content_chars(self) -> int: ...
    @property
    def reasoning_chars(self) -> int: ...
    @property
    def completion_tokens(self) -> int | None: ...
    @property
    def first_text_at(self) -> float | None: ...

    def text_so_far(self) -> str: ...


@runtime_checkable
class SectionedStream(StreamState, Protocol):
    """A recipe written in sections (:class:`~.sections.SectionStreams`): its parts are not one text,
    so it says itself what is complete, and how each section stands."""

    def partial(self) -> PartialRecipe | None: ...

    def section_states(self) -> dict[str, str]: ...


def partial_of(stream: StreamState) -> PartialRecipe | None:
    """What of the recipe ``stream`` writes is complete."""
    return stream.partial() if isinstance(stream, SectionedStream) else partial_recipe(stream.text_so_far())


class ProgressReporter:
    """Writes ``progress`` and ``partial`` at most once per interval while a recipe streams."""

    def __init__(
        self,
        write: Callable[[Progress, PartialRecipe | None], bool],
        *,
        interval_s: float,
        expected_tokens: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.write = write
        self.interval_s = interval_s
        self.expected_tokens = expected_tokens
        self.clock = clock
        self._stream: StreamState | None = None
        self._stop = threading.Event()
        #: Set once a write says the job no longer runs the recipe stage: the model call in flight is closed.
        self.cancellation = Cancellation()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
        self._last: tuple[Any, ...] | None = None
        self._shown: PartialRecipe | None = None  #: the last partial written
        self._held: PartialRecipe | None = None  #: shown until the stream watched now shows as much

    def watch(self, stream: StreamState) -> None:
        """Report on ``stream`` from now on (each attempt starts again from nothing)."""
        self._stream = stream

    def hold_partial(self) -> None:
        """Keep the partial recipe shown so far until the next stream's shows as much (a recipe begun in sections
        and then written whole: the user keeps what was on screen, the whole answer replaces it once richer)."""
        self._held = self._shown

    def _partial(self, stream: StreamState) -> PartialRecipe | None:
        partial = partial_of(stream)
        if self._held is not None:
            if shown_size(partial) < shown_size(self._held):
                return self._held
            self._held = None
        self._shown = partial or self._shown
        return partial

    def __enter__(self) -> ProgressReporter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop reporting; a write in flight finishes on its own, and the job store refuses it once the stage
        has recorded its own measurements (``JobStore.record_progress``), so the step never waits for it."""
        self._stop.set()

    def progress(self) -> Progress | None:
        """The ``progress`` document of the stream now, or None before any attempt."""
        stream = self._stream
        if stream is None:
            return None
        chars = stream.content_chars + stream.reasoning_chars
        tokens = stream.completion_tokens
        if tokens is None:
            tokens = round(chars / CHARS_PER_TOKEN)
        expected = self.expected_tokens
        eta_ms: int | None = None
        if stream.first_text_at is not None and tokens > 0:
            writing_s = self.clock() - stream.first_text_at
            if writing_s >= MIN_RATE_WINDOW_S:
                eta_ms = int(max(expected - tokens, 0) / (tokens / writing_s) * 1000)
        return Progress(
            chars=chars,
            tokens=tokens,
            expectedTokens=expected,
            percent=min(MAX_STREAMING_PERCENT, tokens * 100 // expected),
            etaMs=eta_ms,
            updatedAt=iso(now_utc()),
            sections=stream.section_states() if isinstance(stream, SectionedStream) else None,
        )

    def finished(self) -> Progress:
        """The ``progress`` of a validated recipe: 100 %, nothing left to wait for."""
        doc = self.progress()
        return Progress(
            chars=doc.chars if doc else 0,
            tokens=doc.tokens if doc else 0,
            expectedTokens=self.expected_tokens,
            percent=100,
            etaMs=0,
            updatedAt=iso(now_utc()),
            sections=doc.sections if doc else None,
        )

    def report(self) -> bool:
        """Write the current state (again, if unchanged: the write is also the job's liveness check); False
        once the job no longer takes progress, which cancels the model call in flight."""
        stream, doc = self._stream, self.progress()
        if stream is None or doc is None:  # no attempt yet
            return True
        state = (id(stream), doc.chars, doc.tokens, tuple((doc.sections or {}).items()))
        changed, self._last = state != self._last, state
        try:
            applied = self.write(doc, self._partial(stream) if changed else None)
        except Exception:  # progress is best effort; the job goes on without it
            logger.warning("progress write failed", exc_info=True)
            return True
        if not applied:
            logger.info("the job no longer runs the recipe stage: closing the model call")
            self.cancellation.cancel("the job no longer runs the recipe stage")
        return applied

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if not self.report():
                return
