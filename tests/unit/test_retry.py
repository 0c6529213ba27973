"""The one retry rule (``decide_retry``), and how a ``Retry-After`` header is read."""

from __future__ import annotations

from chuixiang.resilience.retry import RetryPolicy, decide_retry
from chuixiang.upstream.failures import (
    ConnectionDropped,
    IdleTimeout,
    StatusError,
    UpstreamError,
    retry_after_seconds,
)


def _decide(failure: UpstreamError, *, attempt: int = 1, elapsed_ms: float = 10, remaining_ms: float = 4000) -> bool:
    policy = RetryPolicy(max_attempts=2, window_ms=500, min_attempt_ms=2000, base_backoff_s=0.1)
    return decide_retry(failure, attempt=attempt, elapsed_ms=elapsed_ms, remaining_ms=remaining_ms, policy=policy).retry


def test_retry_rule() -> None:
    transient = StatusError("503", status=503)
    assert _decide(transient)
    assert not _decide(transient, elapsed_ms=600)  # late
    assert not _decide(transient, attempt=2)  # one retry at most
    assert not _decide(transient, remaining_ms=1500)  # no room for a typical attempt
    assert not _decide(IdleTimeout("idle"))  # timeouts never
    assert not _decide(ConnectionDropped("mid", bytes_received=10, content_started=True))
    assert _decide(ConnectionDropped("before any byte"))
    assert not _decide(StatusError("401", status=401))  # the request is refused, not the upstream down
    too_long = StatusError("429", status=429, retry_after_s=30)
    assert not _decide(too_long)  # Retry-After does not fit the budget
    fits = StatusError("429", status=429, retry_after_s=0.2)
    assert _decide(fits)


def test_retry_after_parsing() -> None:
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert retry_after_seconds("soon") is None


def test_a_full_key_is_waited_out_inside_the_budget_for_the_call_a_job_cannot_do_without() -> None:
    """The whole recipe's call (``quota_attempts``): a 429 is retried after its Retry-After whenever it came and
    however often, while the budget holds an attempt after the wait; the ordinary rule (a section's) once."""
    patient = RetryPolicy(max_attempts=2, window_ms=500, min_attempt_ms=2000, base_backoff_s=0.1, quota_attempts=5)
    full = StatusError("429", status=429, retry_after_s=1.5)

    def decide(attempt: int, remaining_ms: float, policy: RetryPolicy = patient) -> tuple[bool, float]:
        d = decide_retry(full, attempt=attempt, elapsed_ms=900, remaining_ms=remaining_ms, policy=policy)
        return d.retry, d.wait_s

    assert decide(1, 10_000) == (True, 1.5) and decide(4, 10_000)[0]  # late in its attempt, and again
    assert not decide(5, 10_000)[0]  # at most quota_attempts
    assert not decide(1, 3_000)[0]  # 1.5 s + a 2 s attempt do not fit
    assert not _decide(full, elapsed_ms=900)  # the ordinary rule: not after the window
    assert not decide(1, 10_000, RetryPolicy(2, 500, 2000))[0]  # no patience unless asked (a section, an image)
    assert not decide_retry(
        StatusError("503", status=503), attempt=2, elapsed_ms=10, remaining_ms=10_000, policy=patient
    ).retry
