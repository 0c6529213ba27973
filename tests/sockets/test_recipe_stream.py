"""The recipe stage against a real, misbehaving socket - alone and through the whole pipeline."""

from __future__ import annotations

import httpx
import pytest
from stack_template import Template

from chuixiang_local.loopback import loopback_client
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.scenarios import SCENARIOS, Scenario, assert_give_up
from ..support.stages import function_settings, run_recipe


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
def test_stage_alone(scenario: Scenario, fake: FakeModel, scaled_template: Template) -> None:
    fake.chat_script.extend(scenario.script)
    budget_ms = scaled_template.function_by_dir("recipe").timeout_s * 1000
    outcome, elapsed = run_recipe(scaled_template, fake.base_url, budget_ms, api_key="test-key")

    assert fake.count("/chat/completions") == scenario.requests
    assert outcome.metrics.attempts == scenario.requests
    if scenario.code is None:
        assert outcome.error is None and outcome.result is not None
        assert outcome.result.name == "番茄炒蛋"
    else:
        assert outcome.error is not None and outcome.error.code == scenario.code, outcome.error
        if scenario.retryable is not None:
            assert outcome.error.retryable is scenario.retryable
    assert_give_up(elapsed, scenario, scaled_template)


def test_api_key_is_sent_as_bearer(fake: FakeModel, scaled_template: Template) -> None:
    seen: list[str] = []
    original = fake.chat_script
    fake.chat_script.append(ChatBehaviour())

    def hook(request: httpx.Request) -> None:
        seen.append(request.headers.get("authorization", ""))

    run_recipe(
        scaled_template,
        fake.base_url,
        5000,
        api_key="sk-test-key",
        client=loopback_client(event_hooks={"request": [hook]}),
    )
    assert seen == ["Bearer sk-test-key"] and not original


def test_connection_refused_is_retried_once(scaled_template: Template) -> None:
    with FakeModel() as dead:
        url = dead.base_url
    outcome, _ = run_recipe(scaled_template, url, 5000)
    assert outcome.error is not None and outcome.error.code == "RECIPE_UPSTREAM_ERROR"
    assert outcome.metrics.attempts == 2


def test_runaway_output_is_capped(fake: FakeModel, scaled_template: Template) -> None:
    fake.chat_script.append(ChatBehaviour(chunk_chars=1))
    settings = function_settings(scaled_template, "recipe", fake.base_url).model_copy(update={"recipe_max_tokens": 10})
    outcome, _ = run_recipe(scaled_template, fake.base_url, 5000, settings=settings)
    assert outcome.error is not None and outcome.error.code == "RECIPE_INVALID"
    assert "more than 40 chunks" in outcome.error.detail
    assert outcome.metrics.attempts == 1
