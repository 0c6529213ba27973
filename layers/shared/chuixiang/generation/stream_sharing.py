"""Whether a key's streams write side by side or share one stream's speed, measured by a job in sections.

A provider that batches requests writes each stream at the model's speed however many are open; one that caps a
key's tokens per second splits that speed over them. Which one a key has decides whether sections pay
(``mode_choice``), and only a job in sections can tell: its outline writes alone for a few seconds, then its
sections write at once. The ratio of what they wrote together per second to what the outline wrote alone is
the **key streams**: ~1 on a capped key, about the number of streams where each writes at its own speed.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence

from ..resilience.health import Observation
from .progress import CHARS_PER_TOKEN, StreamState

#: Fewer characters than this written alone say little of one stream's speed (the first ones come in a burst).
MIN_ALONE_CHARS = 60


class StreamSharing:
    """The outline's characters over time (read while the sections start), then the sections' speeds."""

    def __init__(self, started: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.started, self.clock = started, clock
        self._lock = threading.Lock()
        self._samples: list[tuple[float, int]] = []  #: (seconds into the stage, outline characters)
        self._first_text_s: float | None = None

    def outline_at(self, reader: StreamState) -> None:
        """The outline's characters now (called while it writes, and once more as it ends)."""
        if reader.first_text_at is None:
            return
        with self._lock:
            self._first_text_s = reader.first_text_at - self.started
            self._samples.append((self.clock() - self.started, reader.content_chars))

    def alone_chars_per_s(self, until_s: float) -> float | None:
        """The outline's writing speed before ``until_s`` (when the first section began to write)."""
        with self._lock:
            first, samples = self._first_text_s, list(self._samples)
        before = [(t, chars) for t, chars in samples if t <= until_s]
        if first is None or not before:
            return None
        t, chars = before[-1]
        return chars / (t - first) if chars >= MIN_ALONE_CHARS and t > first else None

    def observation(self, spans: Sequence[tuple[float, float, float]]) -> Observation | None:
        """What the job says of its key: one stream's speed alone and the key streams, from ``spans`` (each
        section's writing start and end, seconds into the stage, and its characters per second)."""
        if not spans:
            return None
        alone = self.alone_chars_per_s(min(begin for begin, _, _ in spans))
        if not alone:
            return None
        together = statistics.median(speed for _, _, speed in spans) * most_at_once(spans)
        return Observation(tokens_per_s=alone / CHARS_PER_TOKEN, key_streams=round(together / alone, 2))


def most_at_once(spans: Sequence[tuple[float, float, float]]) -> int:
    """The most spans open at the same moment."""
    edges = sorted([(begin, 1) for begin, _, _ in spans] + [(end, -1) for _, end, _ in spans])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most
