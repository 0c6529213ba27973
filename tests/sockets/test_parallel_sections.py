"""``RecipeSections=parallel`` on real sockets: sections overlap, the stage takes the outline plus the slowest
section, a degradable section is dropped, a core one fails the stage and closes every other stream at once,
and the one total limit closes them all (the scaled ladder: first content 1.5 s, idle 1 s, total 3 s)."""

from __future__ import annotations

import time
from functools import partial

import pytest
from stack_template import Template

from chuixiang.generation.sections import fallback_image_prompt
from chuixiang.resilience.hedge import Hedge, HedgeBudget
from chuixiang.timeouts import RECIPE_HEDGE_AFTER
from chuixiang.upstream.chat_events import cached_prompt_tokens
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.provider_corpus import RECIPE_CARRIERS, Replay, ReplayServer, random_cuts, recipe_stream, recordings
from ..support.scaled import LATE_S, SCALED
from ..support.stages import run_recipe
from ..support.waiting import wait_until
from .test_fallback_breaker import FALLBACK, PRIMARY, settings_with_fallback

OUTLINE_S, STEPS_S, OTHERS_S = 0.4, 0.8, 0.3  #: each section's silence before it answers (a wait, not work)


@pytest.fixture(scope="module")
def parallel() -> Template:
    """Two steps ranges (a stream limit of 5): the shapes these tests name (steps 1-4 as its titles are written,
    the rest once the outline ends)."""
    return Template({**SCALED, "RecipeSections": "parallel", "RecipeMaxStreams": "5"})


def budget_ms(template: Template) -> float:
    return template.function_by_dir("recipe").timeout_s * 1000


def paced(fake: FakeModel) -> None:
    """Each section answers after its own silence, then streams at the fake's (fast) pace."""
    fake.chat_by_section.update(
        {
            "outline": ChatBehaviour(headers_delay_s=OUTLINE_S),
            "steps": ChatBehaviour(headers_delay_s=STEPS_S),
            "extras": ChatBehaviour(headers_delay_s=OTHERS_S),
            "imagePrompt": ChatBehaviour(headers_delay_s=OTHERS_S),
        }
    )


def test_sections_overlap_and_the_stage_takes_the_outline_plus_the_slowest(fake: FakeModel, parallel: Template) -> None:
    """Six steps: the outline, then two ranges of steps, the extras and the image prompt at once; the stage
    takes ~0.4 + 0.8 s, where one after another would take 0.4 + 2 x 0.8 + 2 x 0.3 = 2.6 s."""
    paced(fake)
    outcome, elapsed = run_recipe(parallel, fake.base_url, budget_ms(parallel))
    assert outcome.error is None and outcome.result is not None, outcome.error
    assert fake.sections[0] == "outline"
    assert sorted(str(s) for s in fake.sections[1:]) == ["extras", "imagePrompt", "steps:1-4", "steps:5-6"]
    assert fake.most_open >= 3  # in flight at the same time, as the model saw them
    assert OUTLINE_S + STEPS_S <= elapsed < OUTLINE_S + STEPS_S + 2 * LATE_S
    m = outcome.metrics
    assert m.degraded is None and [s.outcome for s in m.sections or []] == ["ok"] * 5
    assert {c.section for c in m.calls} == set(fake.sections)
    assert m.tokensUsed == sum(c.tokens for c in m.calls) > 0 and m.tokensWasted == 0
    # the later calls repeat the outline's prefix: the fake's prefix cache held some of each
    assert m.cachedPromptTokens and m.cachedPromptTokens > 0
    recipe = outcome.result
    assert [s.order for s in recipe.steps] == [1, 2, 3, 4, 5, 6] and recipe.pairings and recipe.nutrition


def test_a_degradable_section_that_fails_is_dropped_and_the_recipe_served(fake: FakeModel, parallel: Template) -> None:
    """The extras and the image prompt answer 503 (retried once, early): the recipe has no pairings nor
    nutrition, and an image prompt built from its name and summary."""
    fake.chat_by_section.update({"extras": ChatBehaviour(status=503), "imagePrompt": ChatBehaviour(status=503)})
    outcome, _ = run_recipe(parallel, fake.base_url, budget_ms(parallel))
    recipe = outcome.result
    assert outcome.error is None and recipe is not None, outcome.error
    assert outcome.metrics.degraded == ["extras", "imagePrompt"]
    assert recipe.pairings is None and recipe.nutrition is None
    assert recipe.imagePrompt == fallback_image_prompt(recipe.name, recipe.summary)
    extras = [c for c in outcome.metrics.calls if c.section == "extras"]
    assert [c.outcome for c in extras] == ["http_error", "http_error"]  # an early 503 is retried once


def test_a_degradable_section_still_writing_at_the_total_limit_is_dropped(fake: FakeModel, parallel: Template) -> None:
    """The extras drip (a chunk every 0.3 s, inside the idle limit) past the 3 s total: the core is done long
    before; the stage ends at the total limit, from the stage's start, without them."""
    fake.chat_by_section["extras"] = ChatBehaviour(chunk_delay_s=0.3, chunk_chars=1)
    total_s = parallel.number("RecipeTotalTimeoutMs") / 1000
    outcome, elapsed = run_recipe(parallel, fake.base_url, budget_ms(parallel))
    assert outcome.error is None and outcome.result is not None, outcome.error
    assert outcome.metrics.degraded == ["extras"]
    assert total_s <= elapsed < total_s + LATE_S
    assert [c.outcome for c in outcome.metrics.calls if c.section == "extras"] == ["deadline"]


def test_a_core_section_failing_late_fails_the_stage_and_closes_every_other_stream(
    fake: FakeModel, parallel: Template
) -> None:
    """``steps:5-6`` fails after writing (no retry: content had started); the other three sections are still
    streaming (a chunk every 50 ms): each socket is closed within 300 ms of the failure."""
    slow = ChatBehaviour(chunk_delay_s=0.05, chunk_chars=1)
    fake.chat_by_section.update(
        {"steps:1-4": slow, "extras": slow, "imagePrompt": slow, "steps:5-6": ChatBehaviour(kind="error_mid")}
    )
    outcome, elapsed = run_recipe(parallel, fake.base_url, budget_ms(parallel))
    ended = time.monotonic()
    assert outcome.error is not None and outcome.error.code == "RECIPE_UPSTREAM_ERROR", outcome.error
    outcomes = {s.name: s.outcome for s in outcome.metrics.sections or []}
    assert outcomes["steps:5-6"] == "RECIPE_UPSTREAM_ERROR"
    # The siblings closed because of it say so (they said RECIPE_TIMEOUT, blaming a limit that never ran out).
    assert {outcomes[n] for n in ("steps:1-4", "extras", "imagePrompt")} == {"cancelled"}, outcomes
    (fault,) = fake.faults
    assert fault[0] == "error_mid" and fault[2] == "steps:5-6"
    # The model notices a closed socket at its next write (within a chunk's 50 ms): the three others. (The
    # failing one may be seen closed too: we stop reading at its error event, before its last chunks.)
    others = {"steps:1-4", "extras", "imagePrompt"}
    wait_until(lambda: others <= set(fake.hung_up_sections), timeout_s=2, what="the three other streams closed")
    closed = [t for (_, t, _), s in zip(fake.hung_up, fake.hung_up_sections, strict=True) if s in others]
    assert len(closed) == 3 and all(0 <= t - fault[1] < LATE_S for t in closed), [t - fault[1] for t in closed]
    assert ended - fault[1] < LATE_S  # and the stage had returned by then
    assert elapsed < 2.0


def test_the_total_limit_closes_every_stream(fake: FakeModel, parallel: Template) -> None:
    """Every section after the outline drips past the total: at 3 s from the stage's start (not the outline's
    end plus 3 s) every stream is closed and the stage fails RECIPE_TIMEOUT."""
    drip = ChatBehaviour(chunk_delay_s=0.05, chunk_chars=1)  # ~8 s a section, a chunk well inside the idle limit
    fake.chat_by_section.update({"steps": drip, "extras": drip, "imagePrompt": drip})
    total_s = parallel.number("RecipeTotalTimeoutMs") / 1000
    outcome, elapsed = run_recipe(parallel, fake.base_url, budget_ms(parallel))
    started = time.monotonic() - elapsed  # the stage's start
    assert outcome.error is not None and outcome.error.code == "RECIPE_TIMEOUT", outcome.error
    assert total_s <= elapsed < total_s + LATE_S
    later = {"steps:1-4", "steps:5-6", "extras", "imagePrompt"}
    wait_until(lambda: later <= set(fake.hung_up_sections), timeout_s=2, what="every section's stream closed")
    closed = [round(t - started, 3) for (_, t, _), s in zip(fake.hung_up, fake.hung_up_sections, strict=True) if s]
    assert all(total_s <= t < total_s + LATE_S for t in closed), closed


def test_one_hedge_per_job_the_outlines_and_the_sections_follow_the_model_that_wrote_it(
    fake: FakeModel, parallel: Template
) -> None:
    """The primary is slow to write every answer: the outline is hedged to the fallback, which wins; the sections
    go to the outline's model first, and none of them hedges (the job had its one)."""
    fake.chat_by_model[PRIMARY] = ChatBehaviour(stall_after_chunks=0, stall_s=5, keepalive_every_s=0.1)
    settings = settings_with_fallback(parallel, fake.base_url)
    hedge = Hedge(RECIPE_HEDGE_AFTER.of(settings), HedgeBudget())
    outcome, _ = run_recipe(parallel, fake.base_url, budget_ms(parallel), settings=settings, hedge=hedge)
    assert outcome.error is None and outcome.result is not None, outcome.error
    calls = [(c.section, c.model, c.outcome) for c in outcome.metrics.calls]
    assert sorted(calls[:2]) == [("outline", FALLBACK, "ok"), ("outline", PRIMARY, "hedge_lost")]
    assert all((model, result) == (FALLBACK, "ok") for section, model, result in calls[2:]), calls
    assert fake.count("/chat/completions", PRIMARY) == 1


def test_a_section_that_raises_closes_the_others_and_the_error_propagates(
    fake: FakeModel, parallel: Template, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error that is no upstream failure (a bug, a DynamoDB call of the breaker) in one section's thread is
    raised to the stage, as in whole mode, after the other streams were closed, not after they ran to the end."""
    from chuixiang.generation import sections

    slow = ChatBehaviour(chunk_delay_s=0.05, chunk_chars=1)  # each would write for ~7 s
    fake.chat_by_section.update({"steps:1-4": slow, "extras": slow, "imagePrompt": slow})
    real = sections.Section.parse

    def parse(self: sections.Section, text: str) -> object:
        if self.name == "steps:5-6":
            raise RuntimeError("a bug in one section")
        return real(self, text)

    monkeypatch.setattr(sections.Section, "parse", parse)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="a bug in one section"):
        run_recipe(parallel, fake.base_url, budget_ms(parallel))
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize("name", RECIPE_CARRIERS[:3])
def test_sections_in_the_envelopes_real_providers_sent(name: str, parallel: Template) -> None:
    """Each section's answer inside a recorded provider's stream (OpenAI's, DeepSeek's with its reasoning, Groq's),
    cut into reads at random: the recipe merges, and each call reports the cached tokens the provider said."""
    with ReplayServer(Replay(b"")) as server:
        sections = ["outline", "steps:1-4", "steps:5-6", "extras", "imagePrompt"]
        server.by_section.update(
            {s: Replay(recipe_stream(name, s), partial(random_cuts, seed=f"{name}{s}", pieces=20)) for s in sections}
        )
        outcome, _ = run_recipe(parallel, server.base_url, budget_ms(parallel))
    assert outcome.error is None and outcome.result is not None, outcome.error
    assert outcome.result.name == "番茄炒蛋" and [s.order for s in outcome.result.steps] == [1, 2, 3, 4, 5, 6]
    assert [c.section for c in outcome.metrics.calls] == sections and outcome.metrics.degraded is None
    said = cached_prompt_tokens(next(r for r in recordings() if r.name == name).usage())
    assert {c.cachedPromptTokens for c in outcome.metrics.calls} == {said}
