"""The key in no encoding (on real sockets): a recipe whose text echoes the key, in any form a reader could decode,
is no recipe: the job fails ``RECIPE_UPSTREAM_ERROR`` (outcome ``credentials_echoed``) and nothing of the answer is
kept; a degradable section that echoes it is dropped. And the redactor withholds a text holding it in any form."""

from __future__ import annotations

import base64
import codecs
import json
from collections.abc import Callable

import pytest

from chuixiang.redaction import is_echo_notice, key_echoed, redact, register_secret
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel
from chuixiang_local.template import Template

from ..support.scaled import SCALED
from ..support.stages import run_recipe

KEY = "sk-echo-Qm9aX7kLp2Vt8RzW4nYe"

#: The forms a prober found the key stored in, each as a proxy or gateway would write it.
FORMS: dict[str, Callable[[str], str]] = {
    "escaped twice": lambda k: "".join(f"\\\\u{ord(c):04x}" for c in k),
    "escaped three times": lambda k: "".join(f"\\\\\\\\u{ord(c):04x}" for c in k),
    "percent of every byte": lambda k: "".join(f"%{b:02X}" for b in k.encode()),
    "hex": lambda k: k.encode().hex(),
    "base32": lambda k: base64.b32encode(k.encode()).decode(),
    "base64 of UTF-16": lambda k: base64.b64encode(k.encode("utf-16-le")).decode(),
    "fullwidth": lambda k: "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in k),
    "entities": lambda k: "".join(f"&#{ord(c)};" for c in k),
    "NUL-separated": lambda k: "\0".join(k),
    "zero-width": lambda k: "\u200b".join(k),
    "soft hyphens": lambda k: "\u00ad".join(k),
    "spaces": lambda k: " ".join(k),
    "reversed": lambda k: k[::-1],
    "rot13": lambda k: codecs.encode(k, "rot13"),
    "upper-cased": str.upper,
    "half of it": lambda k: k[len(k) // 2 :],
}


@pytest.fixture(autouse=True)
def _registered() -> None:
    register_secret(KEY)


@pytest.mark.parametrize("form", FORMS, ids=list(FORMS))
def test_a_text_holding_the_key_in_any_form_is_withheld_whole(form: str) -> None:
    echoed = f'{{"error": "upstream said: {FORMS[form](KEY)} (request id 42)"}}'
    kept = redact(echoed)
    # Withheld whole (the plain key and its plain pieces are replaced in place): no form of it is left.
    assert kept != echoed and (is_echo_notice(kept) or not key_echoed(kept)), kept
    if form not in ("half of it", "upper-cased"):
        assert is_echo_notice(kept) and str(len(echoed)) in kept, kept
    assert redact("番茄炒蛋：鸡蛋 3 个，番茄 2 个，盐 3 g。A photo of tomato egg stir-fry.") == (
        "番茄炒蛋：鸡蛋 3 个，番茄 2 个，盐 3 g。A photo of tomato egg stir-fry."
    )  # a recipe is left as it is


@pytest.mark.parametrize("form", ["escaped twice", "hex", "fullwidth", "NUL-separated", "reversed"])
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
