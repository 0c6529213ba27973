"""The retry window is timed on the real clock: it judges the upstream's time, not the breaker's."""

from __future__ import annotations

import time

import pytest

from chuixiang.deadline import Budget
from chuixiang.resilience.breaker import Permit
from chuixiang.resilience.calls import CallContext, Reply, Routes
from chuixiang.resilience.retry import RetryPolicy
from chuixiang.resilience.router import Router
from chuixiang.upstream.failures import StatusError


class _SlowBreaker:
    """A breaker whose DynamoDB read and write each take ``delay_s`` (a busy table)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.recorded: list[bool] = []

    def permit(self, lease_s: float) -> Permit:
        time.sleep(self.delay_s)
        return Permit.CALL

    def record(self, permit: Permit, *, healthy: bool) -> None:
        time.sleep(self.delay_s)
        self.recorded.append(healthy)


@pytest.mark.parametrize(("call_s", "retried"), [(0.0, True), (0.3, False)])
def test_the_retry_window_times_the_upstream_not_the_breaker(call_s: float, retried: bool) -> None:
    # A 503 at once is early however slow the breaker's own reads and writes are; a 503 after the
    # window is late however fast they are.
    calls: list[str] = []

    def call(context: CallContext) -> Reply[str]:
        calls.append(context.model)
        time.sleep(call_s)
        if len(calls) == 1:
            raise StatusError("HTTP 503", status=503)
        return Reply("recipe")

    breaker = _SlowBreaker(0.3)
    policy = RetryPolicy(max_attempts=2, window_ms=250, min_attempt_ms=0, base_backoff_s=0.01)
    router = Router(Routes(("m",), breaker_for=lambda model: breaker), policy, "chat")  # type: ignore[arg-type, return-value]
    routed = router.route(call, Budget(60_000, None))
    assert len(calls) == (2 if retried else 1)
    assert (routed.result == "recipe") is retried
    assert all(call.ms < 250 for call in routed.calls) is retried  # the breaker's 0.3 s is in no call's time
