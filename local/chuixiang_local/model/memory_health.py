"""A model's health in memory, for benches and tests that play real seconds faster.

It keeps the counters the jobs table keeps (one hour, never stale) and reads them back as the DynamoDB store
does. Time played ``scale`` times faster is measured back in real time before it is counted (the histograms'
buckets are real seconds and tokens per second), and read out in the played time again, so routing and
``RecipeSections=auto`` compare with the scaled budget what the production model would have measured.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import replace

from chuixiang.resilience.health import ModelHealth, Observation, counters, health_of


def _times(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


class MemoryHealth:
    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.limited_at: float | None = None  #: when a call was last refused for the key's rate limit

    def observe(self, o: Observation) -> None:
        real = Observation(
            first_content_ms=int(o.first_content_ms * self.scale) if o.first_content_ms is not None else None,
            tokens_per_s=_times(o.tokens_per_s, 1 / self.scale),
            valid=o.valid,
            key_streams=o.key_streams,
        )
        with self._lock:
            self.counts.update(counters(real))
            if o.rate_limited:
                self.limited_at = time.monotonic()

    def read(self) -> ModelHealth:
        with self._lock:
            health = health_of([dict(self.counts)], 0.0, 3600)
            if self.limited_at is not None:
                health = replace(health, rate_limited_age_s=(time.monotonic() - self.limited_at) * self.scale)
        if not health.known:
            return health
        s = self.scale
        fc90 = health.first_content_p90_ms
        return replace(
            health,
            first_content_p90_ms=int(fc90 / s) if fc90 is not None else None,
            tokens_per_s_p10=_times(health.tokens_per_s_p10, s),
            first_content_p50_ms=_times(health.first_content_p50_ms, 1 / s),
            tokens_per_s_p50=_times(health.tokens_per_s_p50, s),
        )
