"""A discrete-event simulation of an evening: users arrive, POST, wait in admission's line when refused (obeying
``Retry-After``, keeping their place), and each admitted job runs a recipe stage drawn from the bench's measured
jobs at the peak, then the image stage. On its way a job meets every limit that can bind: admission's slots,
Step Functions' ``StartExecution`` bucket, Lambda's concurrency (with the ASL's retrier), and the provider's
requests and tokens per minute and concurrent streams.

A job is admitted as production admits it (one slot a job, ``RecipeConcurrency`` at once, no more than
``RecipeKeyStreams`` when stated) and borrows its extra streams through production's own lending policy
(:mod:`chuixiang.resilience.key_loans`: the key's stated quotas, its refusals, the probes). The provider counts
what it counts: requests, tokens reserved at admission (prompt + ``max_tokens`` of every call), and streams open
at each instant (a job's own for its whole recipe stage, its borrowed ones while its sections write). A refusal is
handled as the product handles it: a job in sections is written whole after it (``wholeAfter``), a whole answer
waits as it is told and asks again while its budget holds an attempt (``RecipeTotalTimeoutMs`` less
``RecipeMinAttemptMs``), then fails; and the key's lender learns the refusal.

What it simplifies, on purpose: a job's requests are counted when its recipe stage starts; a refused job in
sections falls back to whole at once (in production after its refusal, a few seconds in); and polls are counted
as rates, not simulated one by one.
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

from stack_template import Template

from chuixiang.generation.sections import whole_reservation
from chuixiang.polling import FIRST_POLL_MS
from chuixiang.resilience.key_loans import KeyQuotas, KeyRecord, given_back, lend, lent
from chuixiang.stores.admission import RETRY_AFTER_MAX_S
from chuixiang.stores.job_times import EXPECTED_JOB_S, MIN_SAMPLES
from chuixiang_local.commands.cost import LAMBDA_ARM_GB_SECOND, Assumptions
from chuixiang_local.evening.profile import EVENING_S, IMAGE_S, MAX_TOKENS, JobProfile, arrivals
from chuixiang_local.evening.quotas import AwsQuotas, MinuteWindow, Provider, TokenBucket

#: The submit state before the recipe stage starts (a Lambda of ~0.3 s and two transitions).
SUBMIT_S = 0.5
#: A POST refused by a throttled ``StartExecution`` answers 503; the client waits this long (its default).
THROTTLED_RETRY_S = 5.0
#: One GET's api Lambda time (docs/capacity.md), over the seconds between polls: the api's concurrency per job.
API_CONCURRENCY_PER_JOB = 0.030 / (FIRST_POLL_MS / 1000)
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
    jobs: int  #: jobs admission lets run at once (RecipeConcurrency; no more than RecipeKeyStreams when stated)
    key_streams: int  #: RecipeKeyStreams (0: not stated)
    key_tpm: int  #: RecipeKeyTokensPerMinute (0: not stated)
    give_up_s: float
    progress_interval_s: float
    recipe_memory_mb: int
    image_memory_mb: int
    patience_s: float  #: how long a whole answer refused for the key's quota waits: its total less an attempt

    @classmethod
    def of(cls, template: Template, mode: str) -> Stack:
        concurrency, key_streams = int(template.number("RecipeConcurrency")), int(template.number("RecipeKeyStreams"))
        return cls(
            mode=mode,
            jobs=min(concurrency, key_streams) if key_streams else concurrency,
            key_streams=key_streams,
            key_tpm=int(template.number("RecipeKeyTokensPerMinute")),
            give_up_s=template.number("ClientGiveUpSeconds"),
            progress_interval_s=template.number("ProgressIntervalMs") / 1000,
            recipe_memory_mb=int(template.number("RecipeMemorySize")),
            image_memory_mb=int(template.number("ImageMemorySize")),
            patience_s=(template.number("RecipeTotalTimeoutMs") - template.number("RecipeMinAttemptMs")) / 1000,
        )


@dataclass
class User:
    first_post: float
    ticket: int = -1  #: place in line (-1: none)
    recipe_at: float | None = None
    outcome: str = "waiting"
    lambda_tries: int = 0
    stage_start: float = 0.0  #: when its recipe stage started (a refused whole answer waits from there)
    borrowed: bool = False  #: its key lent it streams (it is written in sections)
    profile: JobProfile | None = None


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
    waited_out: int = 0  #: refusals of a whole answer waited out inside its budget


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
        self.in_flight = 0
        self.key = KeyRecord()
        self.quotas = KeyQuotas(stack.key_streams, stack.key_tpm, stack.jobs, whole_reservation(MAX_TOKENS).total)
        self.frees_at: dict[int, float] = {}  # admitted user -> when admission expects its slot back
        self.job_times: deque[float] = deque(maxlen=JOB_TIMES_KEPT)
        self.admitted_at: dict[int, float] = {}  # what admission's Retry-After is from
        self.start_bucket = TokenBucket(aws.start_execution_bucket, aws.start_execution_refill_s)
        self.rpm, self.tpm = MinuteWindow(provider.rpm), MinuteWindow(provider.tpm)
        self.streams_now = 0.0
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
        free = self.stack.jobs - self.in_flight
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
        self._leave_line(u)
        self.writes.at(now, ADMITTED_WCU)
        self.in_flight += 1
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
        self.functions_now += 1
        u.stage_start = now
        u.profile = self._planned(i, now)
        self._ask_provider(i, now)

    def _planned(self, i: int, now: float) -> JobProfile:
        """The job's plan: its mode's measured job, in sections only with what its key lends it. Both draws are made
        for every job, so a mode whose key lends nothing plays exactly ``whole``'s evening."""
        whole, drawn = self.rng.choice(self.jobs["whole"]), self.rng.choice(self.jobs[self.stack.mode])
        if drawn.mode == "whole" or self.stack.mode == "whole":
            return whole
        tokens = max(0, drawn.reserved_tokens - self.quotas.whole_tokens)
        loan = lend(self.key, self.quotas, str(i), drawn.extra_streams, tokens, now)
        if not loan.streams:
            return whole
        self.key = lent(self.key, str(i), loan, now, now + self.stack.patience_s + drawn.recipe_s)
        self.users[i].borrowed = True
        return drawn

    def _ask_provider(self, i: int, now: float) -> None:
        """The provider admits the job's requests, or refuses: sections are written whole after it, a whole
        answer waits as told while its budget holds an attempt, then fails."""
        u = self.users[i]
        assert u.profile is not None  # nosec B101  # set by recipe_start
        refused = self._refusal(u.profile, now)
        if refused is None:
            self._admitted(i, u.profile, now)
            return
        self.counts.provider_refused[refused] += 1
        self.key = given_back(self.key, str(i), now, refused=True)
        if u.profile.mode != "whole":
            self.counts.fell_back_to_whole += 1
            u.profile, u.borrowed = self.rng.choice(self.jobs["whole"]), False
            self._ask_provider(i, now)
            return
        retry_at = max(now + 1.0, self._fits_at(u.profile, now, refused))
        if retry_at - u.stage_start > self.stack.patience_s:
            self.functions_now -= 1
            self._end(i, now, "failed: provider refused")
            return
        self.counts.waited_out += 1
        self.at(retry_at, i, self._ask_provider)

    def _fits_at(self, profile: JobProfile, now: float, refused: str) -> float:
        """When the refused quota is told to fit again (a stream: a second from now)."""
        if refused == "rpm":
            return self.rpm.fits_at(now, profile.requests)
        if refused == "tpm":
            return self.tpm.fits_at(now, profile.reserved_tokens)
        return now + 1.0

    def _admitted(self, i: int, profile: JobProfile, now: float) -> None:
        end = now + profile.recipe_s
        sections_at = end - profile.extra_seconds
        self.streams_now += 1  # its own now; its borrowed ones when its sections open
        self.streams.add(now, end, 1)
        if profile.extra_streams:
            self.streams.add(sections_at, end, profile.extra_streams)
            self.at(sections_at, i, self._sections_open)
        self.functions.add(self.users[i].stage_start, end + IMAGE_S, 1 + API_CONCURRENCY_PER_JOB)
        self.writes.add(now, end, ITEM_WCU / self.stack.progress_interval_s)
        self.rpm.take(now, profile.requests)
        self.tpm.take(now, profile.reserved_tokens)
        self.requests.at(now, profile.requests)
        self.tokens.at(now, profile.reserved_tokens)
        self.at(end, i, self.recipe_end)

    def _sections_open(self, i: int, now: float) -> None:
        profile = self.users[i].profile
        self.streams_now += profile.extra_streams if profile else 0

    def _refusal(self, profile: JobProfile, now: float) -> str | None:
        if not self.rpm.fits(now, profile.requests):
            return "rpm"
        if not self.tpm.fits(now, profile.reserved_tokens):
            return "tpm"
        limit = self.provider.streams
        if limit is not None and self.streams_now + 1 + profile.extra_streams > limit:
            return "streams"
        return None

    def recipe_end(self, i: int, now: float) -> None:
        u = self.users[i]
        if u.profile is not None:
            self.streams_now -= 1 + u.profile.extra_streams
        if u.borrowed:
            self.key = given_back(self.key, str(i), now, refused=False)
        u.recipe_at = now
        self.transitions.at(now, TRANSITIONS[1])
        self.at(now + IMAGE_S, i, self.job_end)

    def job_end(self, i: int, now: float) -> None:
        self.functions_now -= 1
        self._end(i, now, "served")

    def _end(self, i: int, now: float, outcome: str) -> None:
        self.users[i].outcome = outcome
        self.in_flight -= 1
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
            "sectionsJobs": sum(1 for u in served if u.profile and u.profile.mode != "whole"),
            "outcomes": outcomes,
            "waitS": {"p50": _pct(waits, 50), "p95": _pct(waits, 95)},
            "admission429": self.counts.admission_429,
            "startExecution503": self.counts.start_execution_503,
            "lambdaThrottles": self.counts.lambda_throttles,
            "providerRefused": self.counts.provider_refused,
            "fellBackToWhole": self.counts.fell_back_to_whole,
            "waitedOut": self.counts.waited_out,
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
