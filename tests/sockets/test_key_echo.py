"""The key in no encoding (on real sockets): a recipe whose text echoes the key, in any form a reader could decode,
is no recipe: the job fails ``RECIPE_UPSTREAM_ERROR`` (outcome ``credentials_echoed``) and nothing of the answer is
kept; a degradable section that echoes it is dropped. And the redactor withholds a text holding it in any form."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from stack_template import Template

from chuixiang.redaction import is_echo_notice, key_echoed, redact, register_secret
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.key_encodings import KEY_FORMS
from ..support.scaled import SCALED
from ..support.stages import run_recipe

KEY = "sk-echo-Qm9aX7kLp2Vt8RzW4nYe"


def _half(key: str) -> str:
    return key[len(key) // 2 :]


FORMS: dict[str, Callable[[str], str]] = {**KEY_FORMS, "half_of_it": _half}


@pytest.fixture(autouse=True)
def _registered() -> None:
    register_secret(KEY)


@pytest.mark.parametrize("form", FORMS, ids=list(FORMS))
def test_a_text_holding_the_key_in_any_form_is_withheld_whole(form: str) -> None:
    echoed = f'{{"error": "upstream said: {FORMS[form](KEY)} (request id 42)"}}'
    kept = redact(echoed)
    # Withheld whole (the plain key and its plain pieces are replaced in place): no form of it is left.
    assert kept != echoed and (is_echo_notice(kept) or not key_echoed(kept)), kept
    if form not in ("half_of_it", "upper_cased"):
        assert is_echo_notice(kept) and str(len(echoed)) in kept, kept
    assert redact("番茄炒蛋：鸡蛋 3 个，番茄 2 个，盐 3 g。A photo of tomato egg stir-fry.") == (
        "番茄炒蛋：鸡蛋 3 个，番茄 2 个，盐 3 g。A photo of tomato egg stir-fry."
    )  # a recipe is left as it is


@pytest.mark.parametrize("form", ["escaped_twice", "hex", "fullwidth", "nul_separated", "reversed"])
def test_a_recipe_echoing_the_key_fails_the_job_and_is_never_kept(fake: FakeModel, form: str) -> None:
    whole = Template({**SCALED, "RecipeSections": "whole"})
    fake.chat_script.append(ChatBehaviour(echo_key_as=FORMS[form]))
    outcome, _ = run_recipe(whole, fake.base_url, whole.function_by_dir("recipe").timeout_s * 1000, api_key=KEY)
    assert outcome.result is None and outcome.error is not None
    assert outcome.error.code == "RECIPE_UPSTREAM_ERROR" and "echoed the credentials" in outcome.error.detail
    assert [c.outcome for c in outcome.metrics.calls] == ["credentials_echoed"]
    stored = json.dumps(outcome.metrics.model_dump(), ensure_ascii=False) + outcome.error.detail
    assert not any(FORMS[f](KEY)[:12] in stored for f in FORMS)


def test_a_section_echoing_the_key_fails_the_job_when_core_and_is_dropped_when_degradable(fake: FakeModel) -> None:
    parallel = Template({**SCALED, "RecipeSections": "parallel", "RecipeMaxStreams": "5"})
    budget_ms = parallel.function_by_dir("recipe").timeout_s * 1000
    fake.chat_by_section["extras"] = ChatBehaviour(echo_key_as=FORMS["hex"])
    outcome, _ = run_recipe(parallel, fake.base_url, budget_ms, api_key=KEY)
    assert outcome.error is None and outcome.result is not None and outcome.metrics.degraded == ["extras"]
    assert KEY.encode().hex()[:12] not in outcome.result.model_dump_json()
    fake.chat_by_section["outline"] = ChatBehaviour(echo_key_as=FORMS["rot13"])
    outcome, _ = run_recipe(parallel, fake.base_url, budget_ms, api_key=KEY)
    assert outcome.result is None and outcome.error is not None and outcome.error.code == "RECIPE_UPSTREAM_ERROR"
    assert outcome.metrics.wholeAfter is None  # an echo is no shape to write whole after: the key would go again
