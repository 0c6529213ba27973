"""The synthetic job: every few minutes, one job through the public API exactly as a client cooks it.

Why: at 4 jobs an hour an outage looks like the background for the better part of an hour (a burn alarm needs
several failures before one in two hundred stops being noise), and at night there are no jobs at all. A run POSTs
a dish (a fresh name each time: no cached recipe and no job in flight answers it), polls as the client does until
the job ends or its deadline has passed, and publishes what a user would have seen:

* ``SyntheticJobs`` by ``Outcome`` (:class:`Outcome`), ``SyntheticLatencyMs`` from the POST to the recipe and
  picture (a status page's "how long does a dish take now");
* ``SyntheticFailures``, 0 or 1 for every run: 1 when the run's job failed and a second job started at once did
  not succeed (one background failure in two hundred is not an outage; two in a row are, and a total outage
  fails both in seconds). ``SyntheticFailingAlarm`` pages on it.

A refusal (429) is admission's business (``AdmissionBurnAlarm``), not a failure here. An answer that is not the
API's shape (a WAF's HTML page, a 202 without a job, a deadline that is no time) is ``api_error`` with its status,
never a crash: a crash publishes nothing, and only the missing-data alarm would notice, half an hour later.
Runs never overlap (:mod:`chuixiang.stores.synthetic_lease`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from enum import StrEnum
from typing import Protocol, TypeVar

import httpx
from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import ClientError
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from .job_status import JobStatus
from .limit_rules import SAFETY_MARGIN_S, finish_margin_ms
from .observability import dimensioned_metric, logger, metrics

#: Dishes the synthetic job cooks in turn; each run's name gets the second it started.
DISHES = ("番茄炒蛋", "宫保鸡丁", "麻婆豆腐", "红烧肉", "清蒸鲈鱼", "酸辣土豆丝")
#: A confirming job starts only with at least this much of the invocation left.
CONFIRM_MIN_MS = 10_000
#: Poll pacing when an answer names none, and its bounds when one does.
POLL_DEFAULT_MS, POLL_MIN_MS, POLL_MAX_MS = 2_000, 250, 10_000
#: One request's own limit (connect, read): the API answers in well under a second.
REQUEST_TIMEOUT_S = 10.0


class Outcome(StrEnum):
    OK = "ok"  #: SUCCEEDED
    FAILED = "failed"  #: the job ended FAILED (the code says why)
    LATE = "late"  #: still not ended once its deadline and the safety margin had passed
    API_ERROR = "api_error"  #: the API could not be reached, or answered 5xx or an unexpected status
    REFUSED = "refused"  #: 429, no slot now
    UNFINISHED = "unfinished"  #: this invocation's own time ran out first (a confirming job only)

    @property
    def failing(self) -> bool:
        return self in (Outcome.FAILED, Outcome.LATE, Outcome.API_ERROR)


class SyntheticEvent(BaseModel):
    """The schedule's input (``{}``); a dish only when an operator invokes it by hand."""

    dish: str | None = None


class SyntheticJob(BaseModel):
    dish: str
    outcome: Outcome
    jobId: str | None = None
    code: str | None = None  #: the job's error code, or the API's
    httpStatus: int | None = None  #: the answer that ended it, when one did
    ms: int  #: from the POST to the end as seen by polling


class SyntheticResult(BaseModel):
    jobs: list[SyntheticJob]
    failing: bool  #: the run's failure stands (``SyntheticFailures`` 1)
    skipped: bool = False  #: another run held the lease: this one cooked nothing and published nothing


class Accepted(BaseModel):
    """What a ``202`` must say for the run to follow the job (the API's ``JobAccepted``, the fields read)."""

    jobId: str = Field(min_length=1)
    deadlineAt: AwareDatetime


class _Error(BaseModel):
    code: str | None = None


class Seen(BaseModel):
    """What a ``200`` poll must say (the job document, the fields read)."""

    model_config = ConfigDict(extra="ignore")
    status: JobStatus
    error: _Error | None = None


_M = TypeVar("_M", bound=BaseModel)

#: The code of an answer that is not the API's shape.
MALFORMED = "MALFORMED_ANSWER"


Clock = Callable[[], float]


class _Give(Exception):
    """The job's end as far as this run can tell (raised out of the polling loop)."""

    def __init__(self, outcome: Outcome, status: int | None = None, code: str | None = None) -> None:
        super().__init__(outcome.value)
        self.outcome, self.status, self.code = outcome, status, code


def _error_code(answer: httpx.Response) -> str | None:
    try:
        body = answer.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    return error.get("code") if isinstance(error, dict) else None


def _pause_ms(answer: httpx.Response) -> float:
    """What the API asks for: ``Retry-After`` (seconds) on a throttled poll, else ``pollAfterMs``."""
    if answer.headers.get("retry-after", "").isdigit():
        return int(answer.headers["retry-after"]) * 1000
    try:
        asked = answer.json().get("pollAfterMs")
    except (ValueError, AttributeError):
        asked = None
    return min(POLL_MAX_MS, max(POLL_MIN_MS, asked if isinstance(asked, int) else POLL_DEFAULT_MS))


class Cook:
    """One dish through the API as the client cooks it: POST, then polls until the job ends or may no longer."""

    def __init__(self, client: httpx.Client, ends_at: float, clock: Clock = time.time) -> None:
        """``ends_at``: when this invocation must stop waiting (epoch seconds)."""
        self.client, self.ends_at, self.clock = client, ends_at, clock

    def __call__(self, dish: str) -> SyntheticJob:
        started, job_id = self.clock(), None
        try:
            job_id, give_up_at = self._post(dish)
            self._poll(job_id, give_up_at)
        except _Give as end:
            outcome, status, code = end.outcome, end.status, end.code
        except httpx.HTTPError as exc:
            outcome, status, code = Outcome.API_ERROR, None, type(exc).__name__
        return SyntheticJob(
            dish=dish,
            outcome=outcome,
            jobId=job_id,
            code=code,
            httpStatus=status,
            ms=round((self.clock() - started) * 1000),
        )

    def _post(self, dish: str) -> tuple[str, float]:
        answer = self.client.post("/recipes", json={"dish": dish}, headers={"Idempotency-Key": str(uuid.uuid4())})
        if answer.status_code == 429:
            raise _Give(Outcome.REFUSED, 429, _error_code(answer))
        if answer.status_code != 202:
            raise _Give(Outcome.API_ERROR, answer.status_code, _error_code(answer))
        accepted = _shaped(Accepted, answer)
        # The client's rule: wait until the job's deadline and the safety margin (the state machine ends it by then).
        return accepted.jobId, accepted.deadlineAt.timestamp() + SAFETY_MARGIN_S

    def _poll(self, job_id: str, give_up_at: float) -> None:
        """Poll at the pace the API asks for; at least once, however late it already is."""
        while True:
            last = self.client.get(f"/recipes/{job_id}")
            if last.status_code == 200:
                self._ended(last)
            elif last.status_code != 429 and last.status_code < 500:
                raise _Give(Outcome.API_ERROR, last.status_code, _error_code(last))
            if self.clock() >= self.ends_at:
                raise _Give(Outcome.UNFINISHED)
            if self.clock() >= give_up_at:  # a 5xx poll to the end is the API's failure; else the job is late
                raise _Give(Outcome.API_ERROR if last.status_code >= 500 else Outcome.LATE, last.status_code)
            time.sleep(max(0.0, min(_pause_ms(last) / 1000, self.ends_at - self.clock(), give_up_at - self.clock())))

    @staticmethod
    def _ended(answer: httpx.Response) -> None:
        seen = _shaped(Seen, answer)
        if seen.status is JobStatus.SUCCEEDED:
            raise _Give(Outcome.OK, 200)
        if seen.status is JobStatus.FAILED:
            raise _Give(Outcome.FAILED, 200, seen.error.code if seen.error else None)


def _shaped(model: type[_M], answer: httpx.Response) -> _M:
    """``answer``'s body as ``model``, or the run's end as an ``api_error`` with the answer's status."""
    try:
        return model.model_validate_json(answer.content)
    except ValidationError:
        raise _Give(Outcome.API_ERROR, answer.status_code, MALFORMED) from None


def dish_of_the_moment(clock: Clock = time.time) -> str:
    """A dish no run before has cooked (the millisecond it starts: a run that ends at once, an API refusing it,
    can be followed by another within the second), so neither the recipe cache nor a job in flight answers it; the
    dishes take turns."""
    now = clock()
    second = int(now)
    stamp = f"{time.strftime('%m%d%H%M%S', time.gmtime(second))}{int(now * 1000) % 1000:03d}"
    return f"{DISHES[second // 60 % len(DISHES)]} {stamp}"


class Lease(Protocol):
    """One run at a time (:class:`chuixiang.stores.synthetic_lease.SyntheticLease` on the table)."""

    def take(self, run_id: str, now: float, until: float) -> bool: ...

    def give_back(self, run_id: str) -> None: ...


def run_alone(
    lease: Lease, run_id: str, remaining_ms: Callable[[], float], run: Callable[[], SyntheticResult]
) -> SyntheticResult:
    """``run()`` when no other run is under way; else a skipped result, and nothing published (the run under way
    publishes its own)."""
    now = time.time()
    try:
        alone = lease.take(run_id, now, now + remaining_ms() / 1000)
    except ClientError:  # the table cannot say: watching matters more than a rare overlap
        logger.exception("synthetic lease unavailable: running without it")
        return run()
    if not alone:
        logger.warning("synthetic run skipped: the previous run is still under way")
        return SyntheticResult(jobs=[], failing=False, skipped=True)
    try:
        return run()
    finally:
        lease.give_back(run_id)


def run_synthetic(
    event: SyntheticEvent, client: httpx.Client, remaining_ms: Callable[[], float], clock: Clock = time.time
) -> SyntheticResult:
    """One run: a job, and a second one at once if the first failed; publish what a user saw."""
    budget_ms = remaining_ms()
    cook = Cook(client, clock() + (budget_ms - finish_margin_ms(budget_ms)) / 1000, clock)
    dish = event.dish or dish_of_the_moment(clock)
    jobs = [cook(dish)]
    if jobs[0].outcome.failing and remaining_ms() >= CONFIRM_MIN_MS:
        jobs.append(cook(f"{dish} 2"))
    failing = jobs[0].outcome.failing and not any(job.outcome is Outcome.OK for job in jobs)
    for job in jobs:
        logger.info("synthetic job", extra=job.model_dump())
        dimensioned_metric("SyntheticJobs", MetricUnit.Count, 1, Outcome=job.outcome.value)
        if job.outcome is Outcome.OK:
            metrics.add_metric(name="SyntheticLatencyMs", unit=MetricUnit.Milliseconds, value=job.ms)
    metrics.add_metric(name="SyntheticFailures", unit=MetricUnit.Count, value=int(failing))
    return SyntheticResult(jobs=jobs, failing=failing)
