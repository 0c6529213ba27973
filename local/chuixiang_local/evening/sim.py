"""A discrete-event simulation of an evening: users arrive, POST, wait in admission's line when refused (obeying
``Retry-After``, keeping their place), and each admitted job runs a recipe stage drawn from the bench's measured
jobs at the peak, then the image stage. On its way a job meets every limit that can bind: admission's slots,
Step Functions' ``StartExecution`` bucket, Lambda's concurrency (with the ASL's retrier), and the provider's
requests and tokens per minute and concurrent streams.

What it simplifies, on purpose: a job's model requests are made when its recipe stage starts (a section starts a
few seconds later in production: the per-minute windows barely notice); a ``parallel`` job refused by the
provider falls back to one whole stream (production degrades or merges-then-falls-back; the effect on the
provider is the same); and polls are counted as rates, not simulated one by one.
"""

from __future__ import annotations

import heapq
import math
import random
import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chuixiang.resilience.key_loans import PROBE_FIRST_S
from chuixiang.job_start import POLL_AFTER_MS
from chuixiang.stores.admission import RETRY_AFTER_MAX_S
from chuixiang.stores.job_times import EXPECTED_JOB_S, MIN_SAMPLES
from chuixiang_local.commands.cost import LAMBDA_ARM_GB_SECOND, Assumptions
from chuixiang_local.evening.profile import EVENING_S, IMAGE_S, JobProfile, arrivals
from chuixiang_local.evening.quotas import AwsQuotas, MinuteWindow, Provider, TokenBucket
from chuixiang_local.template import Template

#: The submit state before the recipe stage starts (a Lambda of ~0.3 s and two transitions).
SUBMIT_S = 0.5
#: A POST refused by a throttled ``StartExecution`` answers 503; the client waits this long (its default).
THROTTLED_RETRY_S = 5.0
#: One GET's api Lambda time (docs/capacity.md), over the seconds between polls: the api's concurrency per job.
API_CONCURRENCY_PER_JOB = 0.030 / (POLL_AFTER_MS / 1000)
#: Job item size in KB (4 write units a progress write); an admitted POST's writes (ticket, slot, job item, dish
#: claim: small items); a refused one's (the ticket, and its line bucket item: ~50 bytes a place, 16 buckets).
ITEM_WCU = 4
ADMITTED_WCU = 4
LINE_BUCKETS = 16
PLACE_BYTES = 50
#: Step Functions state transitions: before the recipe stage, after it, and to the end.
TRANSITIONS = (3, 3, 4)
#: The recent job times admission's Retry-After averages (``JobTimes`` keeps this hour's and the last).
JOB_TIMES_KEPT = 200
#: The ASL's retrier on ``Lambda.TooManyRequestsException``: 1 s then 2 s, full jitter.
LAMBDA_RETRY_INTERVALS_S = (1.0, 2.0)


@dataclass(frozen=True)
class Stack:
    """What the template configures that an evening meets."""

    mode: str
    streams: int  #: RecipeConcurrency: the model streams admission allows at once
    max_streams: int  #: RecipeMaxStreams: the streams of one job written in sections
    give_up_s: float
    progress_interval_s: float
    recipe_memory_mb: int
    image_memory_mb: int

    @classmethod
    def of(cls, template: Template, mode: str) -> Stack:
        return cls(
            mode=mode,
            streams=int(template.number("RecipeConcurrency")),
            max_streams=int(template.number("RecipeMaxStreams")),
            give_up_s=template.number("ClientGiveUpSeconds"),
            progress_interval_s=template.number("ProgressIntervalMs") / 1000,
            recipe_memory_mb=int(template.number("RecipeMemorySize")),
            image_memory_mb=int(template.number("ImageMemorySize")),
        )


@dataclass
class User:
    first_post: float
    ticket: int = -1  #: place in line (-1: none)
    recipe_at: float | None = None
    outcome: str = "waiting"
    lambda_tries: int = 0
    taken: int = 0  #: what admission gave its job (:meth:`Slots.take`)
    width: int = 1  #: the streams admission granted its job
    profile: JobProfile | None = None


class Slots:
    """Admission's slots as the api function takes them: ``streams`` job slots; under ``auto`` also wide passes,
    each covering ``width`` slots (a pass and the slots it covers exclude each other); narrow jobs go to the slots
    no pass covers, then into the most broken range; under ``parallel`` only passes."""

    def __init__(self, mode: str, streams: int, width: int) -> None:
        self.mode, self.width = mode, width
        self.passes = streams // width if mode != "whole" else 0
        self.uncovered = streams - self.passes * width
        self.narrow_in = [0] * self.passes  # narrow jobs in each pass's range
        self.pass_held = [False] * self.passes

    def free_count(self) -> int:
        """Jobs that could be admitted now (one stream each; passes under ``parallel``)."""
        if self.mode == "parallel":
            return self.pass_held.count(False)
        ranges = sum(self.width - n for n, held in zip(self.narrow_in, self.pass_held, strict=True) if not held)
        return self.uncovered + ranges

    def take(self, wide_ok: bool) -> int | None:
        """A pass (returns ``-(k+1)``) when ``wide_ok`` and one is whole, else a narrow slot's range (``k``, or
        ``passes`` for an uncovered slot); ``None``: nothing free."""
        whole = [k for k in range(self.passes) if not self.pass_held[k] and self.narrow_in[k] == 0]
        if (wide_ok or self.mode == "parallel") and whole:
            self.pass_held[whole[0]] = True
            return -(whole[0] + 1)
        if self.mode == "parallel":
            return None
        if self.uncovered:
            self.uncovered -= 1
            return self.passes
        open_ = [k for k in range(self.passes) if not self.pass_held[k] and self.narrow_in[k] < self.width]
        if not open_:
            return None
        k = max(open_, key=lambda k: self.narrow_in[k])
        self.narrow_in[k] += 1
        return k

    def give_back(self, taken: int) -> None:
        if taken < 0:
            self.pass_held[-taken - 1] = False
        elif taken == self.passes:
            self.uncovered += 1
        else:
            self.narrow_in[taken] -= 1


class Line:
    """Admission's line: places by ticket, and how many live places are ahead of one (a Fenwick tree)."""

    def __init__(self, size: int) -> None:
        self.tree = [0] * (size + 1)
        self.next = 0
        self.length = 0

    def _add(self, i: int, v: int) -> None:
        i += 1
        while i < len(self.tree):
            self.tree[i] += v
            i += i & -i

    def ahead(self, ticket: int) -> int:
        total, i = 0, ticket
        while i > 0:
            total += self.tree[i]
            i -= i & -i
        return total

    def join(self) -> int:
        ticket, self.next = self.next, self.next + 1
        self._add(ticket, 1)
        self.length += 1
        return ticket

    def leave(self, ticket: int) -> None:
        self._add(ticket, -1)
        self.length -= 1


@dataclass
class Counts:
    admission_429: int = 0
    start_execution_503: int = 0
    lambda_throttles: int = 0
    provider_refused: dict[str, int] = field(default_factory=lambda: {"rpm": 0, "tpm": 0, "streams": 0})
    fell_back_to_whole: int = 0


class PerSecond:
    """A quantity over the evening, second by second: added over intervals, read as its peak."""

    def __init__(self, horizon_s: int) -> None:
        self.diff = [0.0] * (horizon_s + 2)

    def add(self, start: float, end: float, value: float) -> None:
        self.diff[min(int(start), len(self.diff) - 2)] += value
        self.diff[min(int(end), len(self.diff) - 2) + 1] -= value

    def at(self, t: float, value: float) -> None:
        self.add(t, t, value)

    def series(self) -> list[float]:
        out, level = [], 0.0
        for d in self.diff:
            level += d
            out.append(level)
        return out

    def peak(self) -> float:
        return max(self.series())

    def peak_minute(self) -> float:
        """The most taken in any 60 s."""
        s = self.series()
        window = sum(s[:60])
        best = window
        for i in range(60, len(s)):
            window += s[i] - s[i - 60]
            best = max(best, window)
        return best


class Evening:
    """One evening of ``users`` against one stack, one provider and one region's quotas."""

    def __init__(
        self,
        users: int,
        stack: Stack,
        provider: Provider,
        aws: AwsQuotas,
        jobs: dict[str, list[JobProfile]],
        seed: int = 1,
    ) -> None:
        self.stack, self.provider, self.aws, self.jobs = stack, provider, aws, jobs
        self.rng = random.Random(seed)  # nosec B311  # a simulation's arrivals, reproducible by its seed
        self.users = [User(t) for t in arrivals(users, self.rng)]
        self.line = Line(users)
        self.slots = Slots(stack.mode, stack.streams, stack.max_streams)
        self.frees_at: dict[int, float] = {}  # admitted user -> when admission expects its slot back
        self.job_times: deque[float] = deque(maxlen=JOB_TIMES_KEPT)
        self.admitted_at: dict[int, float] = {}  # what admission's Retry-After is from
        self.start_bucket = TokenBucket(aws.start_execution_bucket, aws.start_execution_refill_s)
        self.rpm, self.tpm = MinuteWindow(provider.rpm), MinuteWindow(provider.tpm)
        self.streams_now = 0.0
        self.refused_at: float | None = None  #: the provider's last 429
        self.functions_now = 0
        self.counts = Counts()
        horizon = int(EVENING_S + stack.give_up_s + 600)
        self.streams, self.functions, self.requests, self.tokens = (PerSecond(horizon) for _ in range(4))
        self.transitions, self.writes = PerSecond(horizon), PerSecond(horizon)
        self.events: list[tuple[float, int, int, Callable[[int, float], None]]] = []
        self.seq = 0

    def at(self, t: float, user: int, handler: Callable[[int, float], None]) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, user, handler))

    def run(self) -> Evening:
        for i, u in enumerate(self.users):
            self.at(u.first_post, i, self.post)
        while self.events:
            t, _, user, handler = heapq.heappop(self.events)
            handler(user, t)
        return self

    # --- the front door ------------------------------------------------------------------------------------

    def post(self, i: int, now: float) -> None:
        u = self.users[i]
        if now - u.first_post > self.stack.give_up_s:
            u.outcome = "gave up"
            self._leave_line(u)
            return
        ahead = self.line.ahead(u.ticket) if u.ticket >= 0 else self.line.length
        free = self.slots.free_count()
        if free <= ahead:
            self.counts.admission_429 += 1
            self.writes.at(now, 1 + math.ceil(self.line.length / LINE_BUCKETS * PLACE_BYTES / 1024))
            if u.ticket < 0:
                u.ticket = self.line.join()
            self.at(now + self._retry_after(now, ahead + 1 - free), i, self.post)
            return
        if not self.start_bucket.take(now):
            self.counts.start_execution_503 += 1
            self.at(now + THROTTLED_RETRY_S, i, self.post)
            return
        others_wait = self.line.length - (1 if u.ticket >= 0 else 0) > 0
        self._leave_line(u)
        self.writes.at(now, ADMITTED_WCU)
        taken = self.slots.take(wide_ok=self.stack.mode == "auto" and not others_wait)
        if taken is None:  # free_count said there was room: the two disagree
            raise RuntimeError("admission's slots changed between counting and taking")
        u.taken, u.width = taken, self.stack.max_streams if taken < 0 else 1
        self.frees_at[i] = now + self._expected_s()
        self.admitted_at[i] = now
        self.transitions.at(now, TRANSITIONS[0])
        self.at(now + SUBMIT_S, i, self.recipe_start)

    def _leave_line(self, u: User) -> None:
        if u.ticket >= 0:
            self.line.leave(u.ticket)
            u.ticket = -1

    def _retry_after(self, now: float, need: int) -> float:
        """As admission computes it: when the ``need``-th held slot is expected to free, 1 to 30 s away."""
        frees = sorted(self.frees_at.values())
        if need <= 0 or not frees:
            return 1.0
        rounds, index = divmod(need - 1, len(frees))
        return float(max(1, min(round(frees[index] + rounds * self._expected_s() - now), RETRY_AFTER_MAX_S)))

    def _expected_s(self) -> float:
        """A typical job's length, as ``JobTimes`` measures it (its default until a few jobs have ended)."""
        return statistics.fmean(self.job_times) if len(self.job_times) >= MIN_SAMPLES else EXPECTED_JOB_S

    # --- the workflow --------------------------------------------------------------------------------------

    def recipe_start(self, i: int, now: float) -> None:
        u = self.users[i]
        if self.functions_now >= self.aws.lambda_concurrency:
            self.counts.lambda_throttles += 1
            if u.lambda_tries >= len(LAMBDA_RETRY_INTERVALS_S):
                self._end(i, now, "failed: Lambda throttled")
                return
            wait = self.rng.uniform(0, LAMBDA_RETRY_INTERVALS_S[u.lambda_tries])
            u.lambda_tries += 1
            self.at(now + wait, i, self.recipe_start)
            return
        limited = self.refused_at is not None and now - self.refused_at < PROBE_FIRST_S
        mode = "whole" if u.width == 1 or (self.stack.mode == "auto" and limited) else self.stack.mode
        profile = self._provider_admits(self.rng.choice(self.jobs[mode]), now)
        if profile is None:
            self._end(i, now, "failed: provider refused")
            return
        u.profile = profile
        self.streams_now += profile.streams
        self.functions_now += 1
        end = now + profile.recipe_s
        self.streams.add(now, end, profile.streams)
        self.functions.add(now, end + IMAGE_S, 1 + API_CONCURRENCY_PER_JOB)
        self.writes.add(now, end, ITEM_WCU / self.stack.progress_interval_s)
        self.at(end, i, self.recipe_end)

    def _provider_admits(self, profile: JobProfile, now: float) -> JobProfile | None:
        """The profile the provider lets run: as drawn, or one whole stream when a parallel job's requests are
        refused; ``None`` when even that is."""
        refused = self._refusal(profile, now)
        if refused:
            self.refused_at = now  # a 429: auto borrows no streams until a probe
        if refused and profile.mode != "whole":
            self.counts.fell_back_to_whole += 1
            profile = self.rng.choice(self.jobs["whole"])
            refused = self._refusal(profile, now)
        if refused:
            self.counts.provider_refused[refused] += 1
            self.refused_at = now
            return None
        self.rpm.take(now, profile.requests)
        self.tpm.take(now, profile.tokens)
        self.requests.at(now, profile.requests)
        self.tokens.at(now, profile.tokens)
        return profile

    def _refusal(self, profile: JobProfile, now: float) -> str | None:
        if not self.rpm.fits(now, profile.requests):
            return "rpm"
        if not self.tpm.fits(now, profile.tokens):
            return "tpm"
        limit = self.provider.streams
        if limit is not None and self.streams_now + profile.streams > limit:
            return "streams"
        return None

    def recipe_end(self, i: int, now: float) -> None:
        u = self.users[i]
        streams = u.profile.streams if u.profile else 0.0
        self.streams_now -= streams
        u.recipe_at = now
        self.transitions.at(now, TRANSITIONS[1])
        self.at(now + IMAGE_S, i, self.job_end)

    def job_end(self, i: int, now: float) -> None:
        self.functions_now -= 1
        self._end(i, now, "served")

    def _end(self, i: int, now: float, outcome: str) -> None:
        self.users[i].outcome = outcome
        self.slots.give_back(self.users[i].taken)
        del self.frees_at[i]
        self.job_times.append(now - self.admitted_at.pop(i))
        self.transitions.at(now, TRANSITIONS[2])

    # --- what it found -------------------------------------------------------------------------------------

    def summary(self, assume: Assumptions) -> dict[str, Any]:
        served = [u for u in self.users if u.outcome == "served"]
        waits = sorted((u.recipe_at or 0) - u.first_post for u in served)
        outcomes: dict[str, int] = {}
        for u in self.users:
            outcomes[u.outcome] = outcomes.get(u.outcome, 0) + 1
        return {
            "mode": self.stack.mode,
            "provider": self.provider.name,
            "users": len(self.users),
            "wideJobs": sum(u.width > 1 for u in served),
            "outcomes": outcomes,
            "waitS": {"p50": _pct(waits, 50), "p95": _pct(waits, 95)},
            "admission429": self.counts.admission_429,
            "startExecution503": self.counts.start_execution_503,
            "lambdaThrottles": self.counts.lambda_throttles,
            "providerRefused": self.counts.provider_refused,
            "fellBackToWhole": self.counts.fell_back_to_whole,
            "peak": {
                "streams": round(self.streams.peak(), 1),
                "rpm": round(self.requests.peak_minute()),
                "tpm": round(self.tokens.peak_minute()),
                "lambda": round(self.functions.peak(), 1),
                "transitionsPerS": round(self.transitions.peak()),
                "wcuPerS": round(self.writes.peak()),
            },
            "usdPer1000Jobs": round(self._usd_per_job([u.profile for u in served if u.profile], assume) * 1000, 2),
        }

    def _usd_per_job(self, profiles: list[JobProfile], assume: Assumptions) -> float:
        """A served job's model bill (no prefix cache), its image, and its two long Lambda stages."""
        if not profiles:
            return 0.0
        tokens = statistics.fmean(assume.tokens_usd(p.prompt_tokens, p.completion_tokens) for p in profiles)
        gb_s = statistics.fmean(
            self.stack.recipe_memory_mb / 1024 * p.recipe_s + self.stack.image_memory_mb / 1024 * IMAGE_S
            for p in profiles
        )
        return tokens + assume.model_usd_per_image + gb_s * LAMBDA_ARM_GB_SECOND


def _pct(values: list[float], p: int) -> float | None:
    if not values:
        return None
    return round(values[min(len(values) - 1, int(len(values) * p / 100))], 1)
