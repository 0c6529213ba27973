"""Who arrives when, and what one job does: the evening's arrivals and the jobs ``chuixiang bench --sections``
measured at the peak (docs/bench/sections.json), drawn from as they were measured."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from stack_template import REPO_ROOT

from chuixiang.generation.mode_choice import OTHER_STREAMS
from chuixiang.generation.sections import sections_reservation, whole_reservation
from chuixiang.settings import Settings

#: A whole answer's ``max_tokens`` (``RECIPE_MAX_TOKENS``' default).
MAX_TOKENS = int(Settings.model_fields["recipe_max_tokens"].default)

SECTIONS_BENCH = REPO_ROOT / "docs" / "bench" / "sections.json"
#: The evening: 17:00 to 21:00, arrivals thickest at 18:30 (a normal curve of sd 40 min, cut at both ends).
EVENING_S = 4 * 3600
PEAK_AT_S = 1.5 * 3600
PEAK_SD_S = 40 * 60
#: The image stage after the recipe (the image model's ~30 s at the peak; ``chuixiang cost`` assumes the same).
IMAGE_S = 30.0


@dataclass(frozen=True)
class JobProfile:
    """One job's recipe stage as measured: how long, how many model requests, stream-seconds, the most streams
    open at once, and tokens; what its requests reserved at admission (prompt + ``max_tokens``, every call)."""

    mode: str
    recipe_s: float
    requests: int
    stream_seconds: float
    prompt_tokens: int
    completion_tokens: int
    most_streams: int = 1

    @cached_property
    def reserved_tokens(self) -> int:
        """What a provider counting tokens at admission reserves for it: one whole answer's, or its sections'
        (the outline, its steps ranges, the extras and the image prompt: ``requests`` - 3 ranges). Computed once
        a profile: an evening asks it millions of times."""
        if self.mode == "whole":
            return whole_reservation(MAX_TOKENS).total
        return sections_reservation(max(1, self.requests - OTHER_STREAMS)).total

    @property
    def extra_streams(self) -> int:
        """The streams it opened beyond the one its job holds."""
        return max(0, self.most_streams - 1)

    @property
    def extra_seconds(self) -> float:
        """How long its extra streams were open (its stream-seconds beyond its own stream's, over them)."""
        if not self.extra_streams:
            return 0.0
        return min(self.recipe_s, max(0.0, self.stream_seconds - self.recipe_s) / self.extra_streams)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def streams(self) -> float:
        """Streams open at once, on average over the recipe stage."""
        return self.stream_seconds / self.recipe_s


def measured_jobs(scenario: str = "peak", path: Path = SECTIONS_BENCH) -> dict[str, list[JobProfile]]:
    """The bench's valid jobs of ``scenario`` by the mode asked for (``auto``'s as it chose)."""
    jobs = json.loads(path.read_text())["jobs"]
    out: dict[str, list[JobProfile]] = {}
    for j in jobs:
        if j["scenario"] == scenario and j["valid"]:
            out.setdefault(j["mode"], []).append(
                JobProfile(
                    mode=j["chosen"],
                    recipe_s=j["totalMs"] / 1000,
                    requests=j["calls"],
                    stream_seconds=j["streamSeconds"],
                    prompt_tokens=j["promptTokens"],
                    completion_tokens=j["completionTokens"],
                    most_streams=j.get("mostStreams", 1),
                )
            )
    return out


def arrivals(users: int, rng: random.Random) -> list[float]:
    """Each user's first POST, seconds into the evening, in order."""
    times: list[float] = []
    while len(times) < users:
        t = rng.gauss(PEAK_AT_S, PEAK_SD_S)
        if 0 <= t < EVENING_S:
            times.append(t)
    return sorted(times)
