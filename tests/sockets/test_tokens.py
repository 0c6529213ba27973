"""Tokens are the bill: each call records what it will be billed, and the stage what it used and wasted."""

from __future__ import annotations

from stack_template import Template

from chuixiang.generation.progress import CHARS_PER_TOKEN
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel, prompt_tokens_of

from ..support.stages import run_recipe
from .test_fallback_breaker import FALLBACK, PRIMARY, budget_ms, settings_with_fallback


def test_a_refused_call_bills_nothing_and_the_answer_is_counted_from_the_providers_usage(
    fake: FakeModel, scaled_template: Template
) -> None:
    fake.chat_by_model[PRIMARY] = ChatBehaviour(status=503)
    outcome, _ = run_recipe(
        scaled_template,
        fake.base_url,
        budget_ms(scaled_template),
        settings=settings_with_fallback(scaled_template, fake.base_url),
    )
    m = outcome.metrics
    assert outcome.result is not None and m.model == FALLBACK
    refused, refused_again, answered = m.calls
    assert refused.tokens == refused_again.tokens == 0  # a 503 is not billed
    # the fake model's usage chunk, as OpenAI sends it (the prompt as it counts it)
    assert answered.promptTokens == prompt_tokens_of(fake.bodies[-1]) > 100
    assert answered.completionTokens == m.completionTokens and answered.tokens > answered.promptTokens
    assert (m.tokensUsed, m.tokensWasted) == (answered.tokens, 0)


def test_a_stream_that_broke_is_estimated_from_what_it_wrote_and_wasted(
    fake: FakeModel, scaled_template: Template
) -> None:
    fake.chat_script.append(ChatBehaviour(kind="error_mid"))  # content, then an error object: no usage sent
    outcome, _ = run_recipe(scaled_template, fake.base_url, budget_ms(scaled_template))
    m = outcome.metrics
    assert outcome.error is not None and len(m.calls) == 1
    (broken,) = m.calls
    assert broken.completionTokens == round((m.outputChars or 0) / CHARS_PER_TOKEN) > 0
    assert broken.promptTokens and broken.promptTokens > 0  # estimated from the prompt's characters
    assert m.tokensUsed == m.tokensWasted == broken.tokens
