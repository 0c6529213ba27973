"""How fast and how good each model is now, measured by every call and every canary probe.

The same model took 21-34 s in the morning and 80-92 s at the evening peak: a model's speed is a
property of the hour, not of the model. So each call adds what it measured to a small record per
(endpoint, model) and hour - a histogram of first-content times, one of writing speeds, and the
valid-recipe count - and a reader takes the current and the previous hour together. Histograms add
atomically (one write per call, no read, no scan) and give pessimistic percentiles by construction:
the p90 of first content is the upper edge of its bucket, the p10 of writing speed the lower edge of
its. A record whose last call is older than the configured age says nothing (``known`` is False).

This module is the policy; the DynamoDB store is ``chuixiang.stores.health_store``.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

#: Upper edges of the first-content buckets, ms (the last bucket is open: at least 120 s).
FIRST_CONTENT_EDGES_MS: tuple[int, ...] = (2_000, 5_000, 10_000, 20_000, 30_000, 45_000, 60_000, 90_000, 120_000)
#: Lower edges of the writing-speed buckets, tokens/s (the first bucket is 0 up to the first edge).
SPEED_EDGES_TPS: tuple[float, ...] = (0.0, 5.0, 10.0, 15.0, 20.0, 30.0, 50.0, 80.0)
#: Lower edges of the key-streams buckets: how many streams' worth of writing a key gave a job's streams at once
#: (1: they shared one stream's speed, a key capped in tokens/s; the streams open: each wrote at its own speed).
KEY_STREAMS_EDGES: tuple[float, ...] = (0.0, 1.5, 2.5, 4.0, 6.0, 9.0)


def first_content_bucket(ms: int) -> int:
    return bisect.bisect_left(FIRST_CONTENT_EDGES_MS, ms)


def speed_bucket(tps: float) -> int:
    return max(0, bisect.bisect_right(SPEED_EDGES_TPS, tps) - 1)


def key_streams_bucket(streams: float) -> int:
    return max(0, bisect.bisect_right(KEY_STREAMS_EDGES, streams) - 1)


def _middle(lower: float, upper: float | None) -> float:
    """A bucket's typical value: its middle (an open bucket: a quarter above its lower edge)."""
    return (lower + upper) / 2 if upper is not None else lower * 1.25


@dataclass(frozen=True)
class Observation:
    """What one call measured. ``first_content_ms`` of a call that gave up waiting is its limit (at least that
    long); ``valid``: whether the answer was a valid recipe (None: it never answered)."""

    first_content_ms: int | None = None
    tokens_per_s: float | None = None  #: one stream's writing speed (None: it wrote beside the job's others)
    valid: bool | None = None
    #: A job written in sections: how many streams' worth of writing its streams had at once (its streams' own
    #: speeds over one stream's alone, :func:`~chuixiang.generation.stream_sharing.key_streams`)
    key_streams: float | None = None
    #: The provider refused the call for the key's rate limit (HTTP 429): its requests or tokens per minute
    rate_limited: bool = False


@dataclass(frozen=True)
class ModelHealth:
    """A model's recent figures. ``known`` is False when it has no call younger than the maximum age."""

    known: bool = False
    samples: int = 0
    first_content_p90_ms: int | None = None  #: the upper edge of the p90's bucket (None: the open bucket)
    tokens_per_s_p10: float | None = None  #: the lower edge of the p10's bucket
    valid_rate: float | None = None
    age_s: float | None = None  #: since the last call
    #: Typical figures (the middle of the median's bucket), what ``RecipeSections=auto`` predicts with: it
    #: compares two modes, where routing wants a pessimistic bound.
    first_content_p50_ms: float | None = None
    tokens_per_s_p50: float | None = None
    key_streams_p50: float | None = None  #: None: no job of this model was written in sections lately
    #: Since the provider last refused a call to it for the key's rate limit (None: not in two hours)
    rate_limited_age_s: float | None = None

    def predicted_ms(self, expected_tokens: int) -> float | None:
        """A pessimistic time to a whole recipe: p90 first content + the tokens at the p10 writing speed."""
        if not self.known or self.first_content_p90_ms is None or not self.tokens_per_s_p10:
            return None if not self.known else float("inf")
        return self.first_content_p90_ms + expected_tokens / self.tokens_per_s_p10 * 1000

    def expected_ms(self, expected_tokens: int) -> float | None:
        """The predicted time to a *valid* recipe: the prediction over the valid rate (a model that writes a
        recipe half the time is worth half as much as its speed says)."""
        predicted = self.predicted_ms(expected_tokens)
        if predicted is None or self.valid_rate is None:
            return predicted
        return predicted / self.valid_rate if self.valid_rate > 0 else float("inf")


def percentile_bucket(counts: Sequence[int], share: float) -> int | None:
    """The index of the bucket holding the ``share`` quantile of ``counts`` (None: no samples)."""
    total = sum(counts)
    if not total:
        return None
    wanted, seen = share * total, 0
    for index, n in enumerate(counts):
        seen += n
        if seen >= wanted:
            return index
    return len(counts) - 1


def summarise(
    first_content: Sequence[int],
    speeds: Sequence[int],
    valid: int,
    answered: int,
    *,
    age_s: float | None,
    max_age_s: float,
    key_streams: Sequence[int] = (),
) -> ModelHealth:
    """The health the histograms say (the current and the previous hour, added). Known only with a recent
    first-content sample: a record of answers alone says nothing of speed."""
    if age_s is None or age_s > max_age_s or not sum(first_content):
        return ModelHealth(known=False, age_s=age_s)
    fc = percentile_bucket(first_content, 0.9)
    sp = percentile_bucket(speeds, 0.1)
    edge = FIRST_CONTENT_EDGES_MS[fc] if fc is not None and fc < len(FIRST_CONTENT_EDGES_MS) else None
    return ModelHealth(
        known=True,
        samples=sum(first_content),
        first_content_p90_ms=edge,
        tokens_per_s_p10=SPEED_EDGES_TPS[sp] if sp is not None else None,
        valid_rate=valid / answered if answered else None,
        age_s=age_s,
        first_content_p50_ms=_typical(first_content, (0, *FIRST_CONTENT_EDGES_MS)),
        tokens_per_s_p50=_typical(speeds, SPEED_EDGES_TPS),
        key_streams_p50=_typical(key_streams, KEY_STREAMS_EDGES),
    )


def _typical(counts: Sequence[int], lower_edges: Sequence[float]) -> float | None:
    """The middle of the bucket holding the median of ``counts`` (bucket i spans lower_edges[i] to the next)."""
    i = percentile_bucket(counts, 0.5)
    if i is None:
        return None
    return _middle(lower_edges[i], lower_edges[i + 1] if i + 1 < len(lower_edges) else None)


def histogram(item: Mapping[str, object], prefix: str, size: int) -> list[int]:
    """``<prefix>0`` … ``<prefix><size-1>`` counters of a stored record (absent: 0)."""
    return [int(str(item.get(f"{prefix}{i}", 0))) for i in range(size)]


def counters(observation: Observation) -> list[str]:
    """The counters of a record one call adds 1 to: its first-content bucket ``fc<i>``, its speed bucket
    ``sp<i>``, ``answered`` and ``valid`` (every store keeps the same ones)."""
    names = []
    if observation.first_content_ms is not None:
        names.append(f"fc{first_content_bucket(observation.first_content_ms)}")
    if observation.tokens_per_s is not None:
        names.append(f"sp{speed_bucket(observation.tokens_per_s)}")
    if observation.key_streams is not None:
        names.append(f"ks{key_streams_bucket(observation.key_streams)}")
    if observation.rate_limited:
        names.append("rl")
    if observation.valid is not None:
        names.append("answered")
        if observation.valid:
            names.append("valid")
    return names


def health_of(
    records: Sequence[Mapping[str, object]], age_s: float | None, max_age_s: float, now: float | None = None
) -> ModelHealth:
    """The health of records' counters added together (the current and the previous hour); ``now`` (epoch
    seconds) dates their last rate limit (``rateLimitedAt``)."""
    fc = (
        [sum(col) for col in zip(*(histogram(r, "fc", len(FIRST_CONTENT_EDGES_MS) + 1) for r in records), strict=True)]
        if records
        else [0] * (len(FIRST_CONTENT_EDGES_MS) + 1)
    )
    sp = (
        [sum(col) for col in zip(*(histogram(r, "sp", len(SPEED_EDGES_TPS)) for r in records), strict=True)]
        if records
        else [0] * len(SPEED_EDGES_TPS)
    )
    ks = [sum(int(str(r.get(f"ks{i}", 0))) for r in records) for i in range(len(KEY_STREAMS_EDGES))]
    valid = sum(int(str(r.get("valid", 0))) for r in records)
    answered = sum(int(str(r.get("answered", 0))) for r in records)
    health = summarise(fc, sp, valid, answered, age_s=age_s, max_age_s=max_age_s, key_streams=ks)
    limited = [float(str(r["rateLimitedAt"])) for r in records if "rateLimitedAt" in r]
    if limited and now is not None:
        return replace(health, rate_limited_age_s=max(0.0, now - max(limited)))
    return health


class HealthStore(Protocol):
    """Where one model's health lives: ``observe`` adds one call, ``read`` the recent figures."""

    def observe(self, observation: Observation) -> None: ...

    def read(self) -> ModelHealth: ...
