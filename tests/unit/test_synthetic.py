"""The synthetic job as a client of the API (``chuixiang.synthetic``), against scripted answers: what each ending
is called, which ones are failures, when a second job confirms one, and that a run stops waiting in time.
The real API over a socket is ``tests/pipeline/test_synthetic_job.py``'s."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from chuixiang import synthetic
from chuixiang.clock import iso, now_utc
from chuixiang.limit_rules import SAFETY_MARGIN_S
from chuixiang.synthetic import (
    DISHES,
    Outcome,
    SyntheticEvent,
    dish_of_the_moment,
    run_synthetic,
)

from ..support.lambda_doubles import Context

JOB = "0badc0de-0000-4000-8000-000000000001"


def _created(deadline_in_s: float = 60) -> httpx.Response:
    deadline = iso(now_utc() + timedelta(seconds=deadline_in_s))
    return httpx.Response(202, json={"jobId": JOB, "status": "PENDING", "pollAfterMs": 250, "deadlineAt": deadline})


def _doc(status: str, code: str | None = None) -> httpx.Response:
    body: dict[str, object] = {"jobId": JOB, "dish": "d", "status": status, "pollAfterMs": 250}
    if code:
        body["error"] = {"code": code, "message": "m"}
    return httpx.Response(200, json=body)


Script = Callable[[httpx.Request], httpx.Response]


def _client(posts: Iterator[httpx.Response], polls: Script) -> tuple[httpx.Client, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return next(posts) if request.method == "POST" else polls(request)

    return httpx.Client(base_url="https://api.example", transport=httpx.MockTransport(answer)), seen


def _run(client: httpx.Client, budget_s: float = 60) -> tuple[list[Outcome], bool]:
    ends = time.monotonic() + budget_s
    result = run_synthetic(SyntheticEvent(dish="番茄炒蛋"), client, lambda: (ends - time.monotonic()) * 1000)
    return [job.outcome for job in result.jobs], result.failing


def test_a_job_that_succeeds_is_one_ok_run() -> None:
    statuses = iter(["RUNNING", "SUCCEEDED"])
    client, seen = _client(iter([_created()]), lambda _: _doc(next(statuses)))
    assert _run(client) == ([Outcome.OK], False)
    post = seen[0]
    assert post.url.path == "/recipes" and json.loads(post.content) == {"dish": "番茄炒蛋"}
    assert post.headers["idempotency-key"]  # a retried POST would not start a second job


def test_a_failure_confirmed_by_a_second_job_stands() -> None:
    client, seen = _client(iter([_created(), _created()]), lambda _: _doc("FAILED", "RECIPE_UPSTREAM_ERROR"))
    assert _run(client) == ([Outcome.FAILED, Outcome.FAILED], True)
    second = json.loads([r for r in seen if r.method == "POST"][1].content)["dish"]
    assert second != "番茄炒蛋"  # its own dish: not joined to the first, not answered from a cache


def test_a_failure_the_second_job_does_not_repeat_is_the_background() -> None:
    answers = iter([_doc("FAILED", "RECIPE_TIMEOUT"), _doc("SUCCEEDED")])
    client, _ = _client(iter([_created(), _created()]), lambda _: next(answers))
    assert _run(client) == ([Outcome.FAILED, Outcome.OK], False)


def test_a_refusal_is_admissions_business_not_a_failure() -> None:
    refused = httpx.Response(429, headers={"retry-after": "5"}, json={"error": {"code": "TOO_MANY_REQUESTS"}})
    client, seen = _client(iter([refused]), lambda _: _doc("RUNNING"))
    assert _run(client) == ([Outcome.REFUSED], False)
    assert len(seen) == 1  # no confirming job


@pytest.mark.parametrize(
    "post",
    [httpx.Response(500, json={"message": "Internal Server Error"}), httpx.Response(401, json={"message": "no"})],
)
def test_an_api_that_will_not_start_jobs_fails(post: httpx.Response) -> None:
    client, _ = _client(iter([post, post]), lambda _: _doc("RUNNING"))
    outcomes, failing = _run(client)
    assert outcomes == [Outcome.API_ERROR, Outcome.API_ERROR] and failing


def test_an_api_that_cannot_be_reached_fails() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    client = httpx.Client(base_url="https://api.example", transport=httpx.MockTransport(refuse))
    result = run_synthetic(SyntheticEvent(dish="d"), client, lambda: 60_000.0)
    assert [(j.outcome, j.code) for j in result.jobs] == [(Outcome.API_ERROR, "ConnectError")] * 2 and result.failing


def test_a_job_still_running_past_its_deadline_is_late_and_polls_stop_then() -> None:
    """The client's rule: wait until ``deadlineAt`` and the safety margin, no longer (the state machine has
    ended the job by then). Here the deadline is a moment from passing."""
    client, _ = _client(iter([_created(0.3 - SAFETY_MARGIN_S)] * 2), lambda _: _doc("RUNNING"))
    started = time.monotonic()
    result = run_synthetic(SyntheticEvent(dish="d"), client, lambda: 20_000.0 - (time.monotonic() - started) * 1000)
    assert result.jobs[0].outcome is Outcome.LATE and result.failing
    assert len(result.jobs) == 2  # confirmed: the second job is late too
    assert time.monotonic() - started < 3


def test_polls_failing_until_the_deadline_are_the_apis_failure() -> None:
    down = httpx.Response(503, json={"message": "Service Unavailable"})
    client, _ = _client(iter([_created(0.3 - SAFETY_MARGIN_S)] * 2), lambda _: down)
    outcomes, failing = _run(client, budget_s=20)
    assert outcomes == [Outcome.API_ERROR, Outcome.API_ERROR] and failing


def test_the_run_stops_waiting_before_its_invocation_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """A confirming job may outlast what is left of the invocation: it is ``unfinished``, and the first failure
    stands (nothing said otherwise)."""
    answers = iter([_doc("FAILED", "INTERNAL")])

    def polls(_: httpx.Request) -> httpx.Response:
        return next(answers, _doc("RUNNING"))

    client, _ = _client(iter([_created(), _created()]), polls)
    monkeypatch.setattr(synthetic, "CONFIRM_MIN_MS", 300)
    started = time.monotonic()
    budget_ms = 700.0  # room for the first job and the confirming one's start
    result = run_synthetic(SyntheticEvent(dish="d"), client, lambda: budget_ms - (time.monotonic() - started) * 1000)
    assert [j.outcome for j in result.jobs] == [Outcome.FAILED, Outcome.UNFINISHED] and result.failing
    # it waited until its finishing margin (max(500 ms, 5 %): 0.2 s in), and stopped before the invocation's end
    assert 0.19 < time.monotonic() - started < budget_ms / 1000


def test_each_run_cooks_a_dish_no_run_before_cooked() -> None:
    def at(m: int) -> Callable[[], float]:
        return lambda: 1_790_000_000.0 + 59 * m

    minutes = [dish_of_the_moment(at(m)) for m in range(3 * len(DISHES))]
    assert len(set(minutes)) == len(minutes)
    # Two runs in one second (the first ended at once): two dishes; the second's recipe is not the first's.
    assert dish_of_the_moment(lambda: 1_790_000_000.0) != dish_of_the_moment(lambda: 1_790_000_000.25)
    assert all(len(d) <= 40 for d in minutes)  # MAX_DISH_CHARS
    assert {d.split(" ")[0] for d in minutes} == set(DISHES)


def test_behind_the_jwt_authorizer_the_function_presents_the_stored_token(
    table: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``SyntheticTokenSecretArn``'s token (stored with or without ``Bearer``) goes on every request, with the
    function's own User-Agent; the handler's run is the module's."""
    import uuid

    import boto3

    from chuixiang.settings import get_settings

    from ..support.handlers import function_module

    arn = boto3.client("secretsmanager", region_name="us-east-1").create_secret(
        Name=f"synthetic-token-{uuid.uuid4()}", SecretString="Bearer tok-123"
    )["ARN"]
    monkeypatch.setenv("SYNTHETIC_TOKEN_SECRET_ARN", arn)
    monkeypatch.setenv("API_URL", "https://api.example")
    monkeypatch.setenv("JOBS_TABLE", table.name)
    get_settings.cache_clear()
    seen: list[httpx.Request] = []
    statuses = iter(["SUCCEEDED"])

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _created() if request.method == "POST" else _doc(next(statuses))

    app = function_module("synthetic")
    real_client = httpx.Client
    monkeypatch.setattr(app.httpx, "Client", lambda **kw: real_client(transport=httpx.MockTransport(answer), **kw))
    context = Context("synthetic", 128, "req-1", int((time.time() + 60) * 1000))
    try:
        result = app.lambda_handler({}, context)
    finally:
        get_settings.cache_clear()
    assert [j["outcome"] for j in result["jobs"]] == ["ok"]
    assert {r.headers["authorization"] for r in seen} == {"Bearer tok-123"}
    assert {r.headers["user-agent"] for r in seen} == {"chuixiang-synthetic"}
    assert all(str(r.url).startswith("https://api.example/recipes") for r in seen)
    assert "Item" not in table.get_item(Key={"pk": "SYNTHETIC#run"})  # the lease is given back


# --- answers that are not the API's shape: api_error with their status, never a crash ------------------------


def _html(status: int) -> httpx.Response:
    return httpx.Response(
        status, text="<html><body>Request blocked</body></html>", headers={"content-type": "text/html"}
    )


@pytest.mark.parametrize(
    "post",
    [
        httpx.Response(202, json=[]),
        httpx.Response(202, json={"jobId": JOB}),  # no deadline
        httpx.Response(202, json={"jobId": JOB, "deadlineAt": "tomorrow"}),
        httpx.Response(202, json={"jobId": "", "deadlineAt": "2026-12-04T20:00:00Z"}),
        httpx.Response(202, json={"jobId": JOB, "deadlineAt": "2026-12-04T20:00:00"}),  # no offset: not a moment
        _html(202),
    ],
)
def test_a_202_that_is_not_a_job_is_an_api_error(post: httpx.Response) -> None:
    client, _ = _client(iter([post, post]), lambda _: _doc("RUNNING"))
    result = run_synthetic(SyntheticEvent(dish="d"), client, lambda: 60_000.0)
    assert [(j.outcome, j.httpStatus, j.code) for j in result.jobs] == [
        (Outcome.API_ERROR, 202, "MALFORMED_ANSWER")
    ] * 2
    assert result.failing


@pytest.mark.parametrize(
    "poll",
    [
        _html(200),
        httpx.Response(200, json=[]),
        httpx.Response(200, json={"status": "COOKING"}),
        httpx.Response(200, json={"status": "FAILED", "error": "x"}),
    ],
)
def test_a_poll_that_is_not_a_job_document_is_an_api_error(poll: httpx.Response) -> None:
    client, _ = _client(iter([_created(), _created()]), lambda _: poll)
    result = run_synthetic(SyntheticEvent(dish="d"), client, lambda: 60_000.0)
    assert [(j.outcome, j.code) for j in result.jobs] == [(Outcome.API_ERROR, "MALFORMED_ANSWER")] * 2


# --- one run at a time ----------------------------------------------------------------------------------------


class _Lease:
    """The lease as the table keeps it: one holder until it gives it back or its time passes."""

    def __init__(self) -> None:
        self.holder: tuple[str, float] | None = None
        self.given_back: list[str] = []

    def take(self, run_id: str, now: float, until: float) -> bool:
        if self.holder and self.holder[1] >= now:
            return False
        self.holder = (run_id, until)
        return True

    def give_back(self, run_id: str) -> None:
        if self.holder and self.holder[0] == run_id:
            self.holder = None
            self.given_back.append(run_id)


def test_a_run_that_finds_another_under_way_cooks_nothing_and_publishes_nothing() -> None:
    lease = _Lease()
    inner: list[synthetic.SyntheticResult] = []

    def second_run() -> synthetic.SyntheticResult:
        overlapping = synthetic.run_alone(lease, "run-2", lambda: 60_000.0, lambda: pytest.fail("cooked twice"))
        inner.append(overlapping)
        return synthetic.SyntheticResult(jobs=[], failing=False)

    synthetic.run_alone(lease, "run-1", lambda: 60_000.0, second_run)
    assert inner[0].skipped and inner[0].jobs == [] and not inner[0].failing
    assert lease.given_back == ["run-1"] and lease.holder is None  # the next tick may run


def test_the_lease_is_given_back_when_the_run_crashes() -> None:
    lease = _Lease()

    def crash() -> synthetic.SyntheticResult:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        synthetic.run_alone(lease, "run-1", lambda: 60_000.0, crash)
    assert lease.holder is None
