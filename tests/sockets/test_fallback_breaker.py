"""Routing around a model that cannot serve: fallbacks inside the budget, a breaker shared in DynamoDB.

Real sockets against the fault server; the breaker's table is moto in-process (the
same conditional writes the Lambda makes). Limits come from the scaled template.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from stack_template import Template

from chuixiang.resilience.breaker import BreakerConfig, CircuitBreaker, Permit
from chuixiang.resilience.fastest import FastestFirst
from chuixiang.resilience.health import Observation
from chuixiang.stores.breaker_store import DynamoBreakerStore
from chuixiang.stores.health_store import DynamoHealthStore
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel, ImageBehaviour

from ..support.scaled import LATE_S
from ..support.stages import function_settings, run_image, run_recipe

PRIMARY, FALLBACK = "model-primary", "model-fallback"
KEEPALIVES_ONLY = ChatBehaviour(stall_after_chunks=0, stall_s=30, keepalive_every_s=0.2)


def settings_with_fallback(template: Template, url: str, function: str = "recipe") -> Any:
    settings = function_settings(template, function, url)
    if function == "recipe":
        return settings.model_copy(update={"recipe_model": PRIMARY, "recipe_fallback_models": FALLBACK})
    return settings.model_copy(update={"image_model": PRIMARY, "image_fallback_models": FALLBACK})


def budget_ms(template: Template) -> float:
    return template.function_by_dir("recipe").timeout_s * 1000


def test_primary_503_fallback_writes_the_recipe(fake: FakeModel, scaled_template: Template) -> None:
    fake.chat_by_model[PRIMARY] = ChatBehaviour(status=503)
    outcome, _ = run_recipe(
        scaled_template,
        fake.base_url,
        budget_ms(scaled_template),
        settings=settings_with_fallback(scaled_template, fake.base_url),
    )
    assert outcome.error is None and outcome.result is not None
    m = outcome.metrics
    assert m.model == FALLBACK
    assert [(c.model, c.outcome, c.status) for c in m.calls] == [
        (PRIMARY, "http_error", 503),
        (PRIMARY, "http_error", 503),
        (FALLBACK, "ok", 200),
    ]
    assert fake.count("/chat/completions", PRIMARY) == 2 and fake.count("/chat/completions", FALLBACK) == 1
    assert m.attempts == 3


def test_keepalives_only_give_up_at_first_content_then_fallback(fake: FakeModel, scaled_template: Template) -> None:
    fake.chat_by_model[PRIMARY] = KEEPALIVES_ONLY
    outcome, _ = run_recipe(
        scaled_template,
        fake.base_url,
        budget_ms(scaled_template),
        settings=settings_with_fallback(scaled_template, fake.base_url),
    )
    assert outcome.error is None and outcome.metrics.model == FALLBACK
    first = outcome.metrics.calls[0]
    assert (first.model, first.outcome) == (PRIMARY, "first_content_timeout")
    limit_ms = scaled_template.number("RecipeFirstContentTimeoutMs")
    assert limit_ms <= first.ms <= limit_ms + LATE_S * 1000, first
    assert [c.model for c in outcome.metrics.calls] == [PRIMARY, FALLBACK]


def test_no_fallback_without_the_minimum_attempt_budget(fake: FakeModel, scaled_template: Template) -> None:
    """After the first-content limit, less than RecipeMinAttemptMs is left: the job fails, fallback never called."""
    fake.chat_by_model[PRIMARY] = KEEPALIVES_ONLY
    first_content = scaled_template.number("RecipeFirstContentTimeoutMs")
    tight = first_content + scaled_template.number("RecipeMinAttemptMs") / 2 + 500  # + the finishing margin
    outcome, _ = run_recipe(
        scaled_template, fake.base_url, tight, settings=settings_with_fallback(scaled_template, fake.base_url)
    )
    assert outcome.error is not None and outcome.error.code == "RECIPE_TIMEOUT"
    assert fake.count("/chat/completions", FALLBACK) == 0
    assert [c.model for c in outcome.metrics.calls] == [PRIMARY]


@pytest.mark.parametrize(
    ("behaviour", "code"),
    [
        (ChatBehaviour(kind="error_mid"), "RECIPE_UPSTREAM_ERROR"),
        (ChatBehaviour(stall_after_chunks=5, stall_s=30), "RECIPE_TIMEOUT"),
        (ChatBehaviour(kind="length"), "RECIPE_INVALID"),  # the model's quality, not its health
    ],
)
def test_no_fallback_once_content_started_or_for_a_bad_answer(
    fake: FakeModel, scaled_template: Template, behaviour: ChatBehaviour, code: str
) -> None:
    """The first-content limit gets all but 500 ms of the total here: beside another suite the fake's first chunks
    came after the scaled 1.5 s, and the call was rightly a first-content timeout, with its fallback (not this
    test's subject: ``test_keepalives_only_give_up_at_first_content_then_fallback`` is)."""
    fake.chat_by_model[PRIMARY] = behaviour
    settings = settings_with_fallback(scaled_template, fake.base_url)
    roomy = settings.model_copy(update={"recipe_first_content_timeout_ms": settings.recipe_total_timeout_ms - 500})
    outcome, _ = run_recipe(scaled_template, fake.base_url, budget_ms(scaled_template), settings=roomy)
    assert outcome.error is not None and outcome.error.code == code
    assert fake.count("/chat/completions", FALLBACK) == 0


def test_image_primary_down_fallback_draws(fake: FakeModel, scaled_template: Template) -> None:
    fake.image_by_model[PRIMARY] = ImageBehaviour(status=503)
    # The fallback is tried only with half the stage's budget left. The primary's three attempts sleep
    # jittered back-offs of up to 0.5 + 1 s, which is half of 3 s: with 10 s, only a stall of over 3 s
    # (not a draw of the jitter) could leave the fallback out.
    outcome, _ = run_image(
        scaled_template, fake.base_url, 10_000, settings=settings_with_fallback(scaled_template, fake.base_url, "image")
    )
    assert outcome.error is None and outcome.result is not None and outcome.metrics.model == FALLBACK
    assert fake.count("/images/generations", FALLBACK) == 1


# --- the breaker ---------------------------------------------------------------------------


def breaker_factory(
    table: Any, url: str, threshold: int = 3, recovery_s: float = 1.0, clock: Callable[[], float] = time.time
) -> Any:
    config = BreakerConfig(failure_threshold=threshold, recovery_s=recovery_s)
    return lambda model: CircuitBreaker(DynamoBreakerStore(table, url, model), model, config, clock=clock)


class ManualClock:
    """Epoch seconds that move only when the test says so: a recovery window or a probe lease is
    then over exactly when the test advances past it, never because a write stalled on a busy
    machine (the breaker stamps ``openedAt`` before its write lands)."""

    def __init__(self) -> None:
        self.now = float(int(time.time()))  # whole seconds, advanced in quarters: every sum is exact

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_breaker_opens_after_threshold_then_rejects_without_a_request(
    fake: FakeModel, table: Any, scaled_template: Template
) -> None:
    fake.chat_by_model[PRIMARY] = ChatBehaviour(status=503)
    settings = function_settings(scaled_template, "recipe", fake.base_url).model_copy(update={"recipe_model": PRIMARY})
    breakers = breaker_factory(table, fake.base_url)
    run_recipe(scaled_template, fake.base_url, budget_ms(scaled_template), settings=settings, breaker_for=breakers)
    run_recipe(scaled_template, fake.base_url, budget_ms(scaled_template), settings=settings, breaker_for=breakers)
    assert fake.count("/chat/completions") == 3  # 2 + 1: the third failure opened it, the retry was refused
    assert breakers(PRIMARY).store.item()["state"] == "open"

    outcome, elapsed = run_recipe(
        scaled_template, fake.base_url, budget_ms(scaled_template), settings=settings, breaker_for=breakers
    )
    # Refused at once: no request, and no wait (a retry back-off would take up the retry window).
    assert fake.count("/chat/completions") == 3 and elapsed < scaled_template.number("RecipeRetryWindowMs") / 1000
    assert outcome.error is not None and outcome.error.code == "RECIPE_UPSTREAM_ERROR" and outcome.error.retryable
    assert [c.outcome for c in outcome.metrics.calls] == ["breaker_open"] and outcome.metrics.attempts == 0


def test_open_breaker_moves_to_the_fallback_at_once(fake: FakeModel, table: Any, scaled_template: Template) -> None:
    breakers = breaker_factory(table, fake.base_url, threshold=1, recovery_s=60)
    breakers(PRIMARY).record(Permit.CALL, healthy=False)
    outcome, _ = run_recipe(
        scaled_template,
        fake.base_url,
        budget_ms(scaled_template),
        settings=settings_with_fallback(scaled_template, fake.base_url),
        breaker_for=breakers,
    )
    assert outcome.error is None and outcome.metrics.model == FALLBACK
    assert fake.count("/chat/completions", PRIMARY) == 0
    assert [c.outcome for c in outcome.metrics.calls] == ["breaker_open", "ok"]


def test_image_breaker_open_degrades_without_a_call(fake: FakeModel, table: Any, scaled_template: Template) -> None:
    settings = function_settings(scaled_template, "image", fake.base_url)
    breakers = breaker_factory(table, fake.base_url, threshold=1, recovery_s=60)
    breakers(settings.image_model).record(Permit.CALL, healthy=False)
    outcome, elapsed = run_image(scaled_template, fake.base_url, 3000, settings=settings, breaker_for=breakers)
    assert outcome.error is not None and outcome.error.code == "IMAGE_UPSTREAM_ERROR"
    assert [c.outcome for c in outcome.metrics.calls] == ["breaker_open"] and outcome.metrics.attempts == 0
    assert fake.count("/images/generations") == 0 and elapsed < scaled_template.number("ImageRetryWindowMs") / 1000


def test_exactly_one_probe_after_recovery_and_its_outcome_decides(table: Any) -> None:
    clock = ManualClock()
    breakers = breaker_factory(table, "http://model", threshold=2, recovery_s=30, clock=clock)
    for _ in range(2):
        breakers("m").record(Permit.CALL, healthy=False)
    clock.advance(29.75)
    assert breakers("m").permit(5) is Permit.REJECT
    clock.advance(0.25)
    # a dozen invocations at once: exactly one wins the probe
    contenders = [breakers("m") for _ in range(12)]
    results: list[Permit] = []
    lock = threading.Lock()

    def ask(b: CircuitBreaker) -> None:
        permit = b.permit(5)
        with lock:
            results.append(permit)

    threads = [threading.Thread(target=ask, args=(b,)) for b in contenders]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(Permit.PROBE) == 1 and results.count(Permit.REJECT) == 11
    prober = next(b for b in contenders if b.store.item().get("probeOwner") == b.owner)
    clock.advance(4)
    prober.record(Permit.PROBE, healthy=False)  # the probe failed: open again, for a new window
    clock.advance(29.75)
    assert breakers("m").store.item()["state"] == "open" and breakers("m").permit(5) is Permit.REJECT
    clock.advance(0.25)
    again = breakers("m")
    assert again.permit(5) is Permit.PROBE
    again.record(Permit.PROBE, healthy=True)
    assert breakers("m").store.item()["state"] == "closed" and breakers("m").permit(5) is Permit.CALL


def test_a_dead_probe_is_taken_over_after_its_lease(table: Any) -> None:
    clock = ManualClock()
    breakers = breaker_factory(table, "http://model", threshold=1, recovery_s=10, clock=clock)
    breakers("m").record(Permit.CALL, healthy=False)
    clock.advance(10)
    assert breakers("m").permit(lease_s=20) is Permit.PROBE  # …and this invocation dies mid-probe
    clock.advance(19.75)
    assert breakers("m").permit(lease_s=20) is Permit.REJECT
    clock.advance(0.25)
    assert breakers("m").permit(lease_s=20) is Permit.PROBE


def test_a_retry_after_the_budget_can_wait_for_is_waited_out_on_the_same_model(
    fake: FakeModel, scaled_template: Template
) -> None:
    fake.chat_script.extend([ChatBehaviour(status=429, retry_after="1"), ChatBehaviour()])
    outcome, _ = run_recipe(
        scaled_template,
        fake.base_url,
        budget_ms(scaled_template),
        settings=settings_with_fallback(scaled_template, fake.base_url),
    )
    assert outcome.error is None and outcome.metrics.model == PRIMARY
    assert [(c.model, c.outcome) for c in outcome.metrics.calls] == [(PRIMARY, "http_error"), (PRIMARY, "ok")]
    (_, first, _), (_, second, _) = fake.requests
    assert 1.0 <= second - first < 1.0 + 0.5 + LATE_S  # Retry-After, not the back-off (at most 0.5 s here)


def test_a_retry_after_longer_than_the_budget_goes_to_the_next_model_at_once(
    fake: FakeModel, scaled_template: Template
) -> None:
    fake.chat_by_model[PRIMARY] = ChatBehaviour(status=503, retry_after="60")
    outcome, _ = run_recipe(
        scaled_template,
        fake.base_url,
        budget_ms(scaled_template),
        settings=settings_with_fallback(scaled_template, fake.base_url),
    )
    assert outcome.error is None and outcome.metrics.model == FALLBACK
    assert [(c.model, c.outcome) for c in outcome.metrics.calls] == [(PRIMARY, "http_error"), (FALLBACK, "ok")]
    (_, primary, _), (_, fallback, _) = fake.requests
    assert fallback - primary < LATE_S  # no wait at all, neither the 60 s nor a back-off


def test_fastest_skips_a_model_measured_too_slow_without_a_request(
    fake: FakeModel, table: Any, scaled_template: Template
) -> None:
    """The primary's last hour: first content after 90-120 s. With the scaled budget it cannot finish, so
    ``fastest`` records it skipped (0 ms) and asks the fallback first, which writes the recipe; every call
    adds to its model's health."""
    settings = settings_with_fallback(scaled_template, fake.base_url)

    def health_for(model: str) -> DynamoHealthStore:
        return DynamoHealthStore(table, fake.base_url, model, max_age_s=3600)

    for _ in range(5):
        health_for(PRIMARY).observe(Observation(first_content_ms=95_000, tokens_per_s=18.0, valid=True))
    fastest = FastestFirst({m: health_for(m).read() for m in settings.recipe_models}, expected_tokens=1600)
    outcome, _ = run_recipe(
        scaled_template,
        fake.base_url,
        budget_ms(scaled_template),
        settings=settings,
        health_for=health_for,
        fastest=fastest,
    )
    assert outcome.result is not None and outcome.metrics.model == FALLBACK
    assert next((c.model, c.outcome, c.ms) for c in outcome.metrics.calls) == (PRIMARY, "skipped", 0)
    assert fake.count("/chat/completions", PRIMARY) == 0 and fake.count("/chat/completions", FALLBACK) == 1
    assert outcome.metrics.attempts == 1
    fallback = health_for(FALLBACK).read()  # the call measured its model
    assert fallback.known and fallback.samples == 1 and fallback.valid_rate == 1.0


def test_fastest_still_calls_the_last_model_however_slow(
    fake: FakeModel, table: Any, scaled_template: Template
) -> None:
    settings = function_settings(scaled_template, "recipe", fake.base_url)  # one model: it is the last
    store = DynamoHealthStore(table, fake.base_url, settings.recipe_model, max_age_s=3600)
    store.observe(Observation(first_content_ms=200_000))
    fastest = FastestFirst({settings.recipe_model: store.read()}, expected_tokens=1600)
    outcome, _ = run_recipe(
        scaled_template, fake.base_url, budget_ms(scaled_template), settings=settings, fastest=fastest
    )
    assert outcome.result is not None and [c.outcome for c in outcome.metrics.calls] == ["ok"]
