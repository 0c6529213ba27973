"""The recipe stage against a real, misbehaving socket - alone and through the whole pipeline."""

from __future__ import annotations

import itertools

import pytest
from stack_template import Template

from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import FakeModel

from ..support.scenarios import SCENARIOS, Scenario, assert_give_up

# 15 s or more in all, scheduled first (tests/conftest.py); mostly waiting on the scaled limits: its own lane
pytestmark = [pytest.mark.long_module, pytest.mark.waiting]

_dishes = itertools.count(1)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
def test_through_pipeline(scenario: Scenario, api: LocalApi, module_fake: FakeModel, scaled_template: Template) -> None:
    module_fake.chat_script.extend(scenario.script)
    status, created = api.post_dish(f"测试菜{next(_dishes)}号 {scenario.id[:20]}")
    assert status == 202, created
    doc = api.wait(created["jobId"], give_up_s=scaled_template.number("StateMachineTimeout"))

    assert module_fake.count("/chat/completions") == scenario.requests
    metrics = doc["metrics"]["recipe"]
    assert metrics["attempts"] == scenario.requests
    if scenario.code is None:
        assert doc["status"] == "SUCCEEDED", doc
        assert doc["recipe"]["steps"] and doc["image"]["url"].endswith(".png")
        assert doc["error"] is None
    else:
        assert doc["status"] == "FAILED", doc
        assert doc["error"]["code"] == scenario.code
        assert doc["error"]["message"] and doc["recipe"] is None
        if scenario.retryable is not None:
            assert doc["error"]["retryable"] is scenario.retryable
    # The limit bounds the model call, timed from its request (the call's own ms), not the stage's total, which
    # also holds the breaker's table read before it (half a second of a loaded machine's moto, in one CI run).
    assert_give_up(metrics["calls"][-1]["ms"] / 1000, scenario, scaled_template, metrics["budgetMs"])
