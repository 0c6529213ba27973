"""No recipe lost to sections, on real sockets (the scaled ladder: first content 1.5 s, idle 1 s, total 3 s, a
whole attempt's minimum 1 s): whatever fails the sections *as sections* (the key's quota, an answer outside its
section's shape, a stall, parts that do not fit the outline), the stage closes them and writes the recipe whole
inside the same deadline, and says why (``wholeAfter``); a lone surrogate is never a crash."""

from __future__ import annotations

import pytest
from stack_template import Template

from chuixiang.generation.recipe import RecipeOutcome
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.scaled import SCALED
from ..support.stages import run_recipe


@pytest.fixture(scope="module")
def parallel() -> Template:
    """Sections fixed (``parallel``) with two steps ranges: the sections run whatever was measured."""
    return Template({**SCALED, "RecipeSections": "parallel", "RecipeMaxStreams": "5"})


def cooked(template: Template, fake: FakeModel) -> tuple[RecipeOutcome, float]:
    budget_ms = template.function_by_dir("recipe").timeout_s * 1000
    return run_recipe(template, fake.base_url, budget_ms)


def served_whole_after(outcome: RecipeOutcome, reason: str) -> None:
    assert outcome.error is None and outcome.result is not None, outcome.error
    m = outcome.metrics
    assert (m.mode, m.wholeAfter) == ("whole", reason), (m.mode, m.wholeAfter, m.modeReason)
    assert m.calls[-1].section is None and m.calls[-1].outcome == "ok"  # the last call wrote it whole
    assert len(outcome.result.steps) >= 6


def served(outcome: RecipeOutcome) -> None:
    """The recipe was served; if a section's quota refusal stood (its retry did not get in), it was written
    whole after it, and says so."""
    assert outcome.error is None and outcome.result is not None, outcome.error
    m = outcome.metrics
    refused = [s.name for s in m.sections or [] if s.core and s.outcome not in ("ok", "cancelled")]
    assert m.wholeAfter == ("quota" if refused else None), (refused, m.wholeAfter, m.modeReason)


def test_a_key_allowing_one_request_at_once_gets_its_recipe_written_whole(fake: FakeModel, parallel: Template) -> None:
    """Moonshot's tier 0: a second request at once is refused (429). The steps sections cannot open beside the
    outline, their retry after Retry-After is refused again, so the stage closes them and writes the recipe
    whole on the stream the job holds."""
    fake.key_quota.max_open, fake.key_quota.busy_retry_after_s = 1, 0.2  # 1 s at the ladder's full scale
    fake.chat_by_section["outline"] = ChatBehaviour(chunk_delay_s=0.01)  # ~1 s: still writing past the retries
    outcome, _ = cooked(parallel, fake)
    served_whole_after(outcome, "quota")
    assert fake.key_quota.refusals and fake.most_open <= 1
    assert 429 in {c.status for c in outcome.metrics.calls if c.outcome == "http_error"}


def test_a_key_allowing_two_requests_at_once_never_loses_the_recipe(fake: FakeModel, parallel: Template) -> None:
    """Two at once: the sections' refusals are waited out inside the deadline or abandoned for a whole answer;
    either way the recipe is served and the key never had more than two requests open."""
    fake.key_quota.max_open, fake.key_quota.busy_retry_after_s = 2, 0.2
    fake.chat_by_section["outline"] = ChatBehaviour(chunk_delay_s=0.003)
    outcome, _ = cooked(parallel, fake)
    served(outcome)
    assert fake.key_quota.refusals and fake.most_open <= 2


def test_a_key_counting_tokens_per_minute_at_admission_never_loses_the_recipe(
    fake: FakeModel, parallel: Template
) -> None:
    """OpenAI's way: each request reserves its prompt and ``max_tokens`` when admitted (the minute scaled to
    1 s); the minute holds the outline and a few sections, not all of them. A refusal is waited out inside the
    deadline, or the sections are abandoned for a whole answer: the recipe is served."""
    fake.key_quota.tokens_per_minute, fake.key_quota.minute_s = 5_000, 1.0
    outcome, elapsed = cooked(parallel, fake)
    served(outcome)
    assert {reason for _, reason in fake.key_quota.refusals} == {"tokens_per_minute"}
    assert elapsed < parallel.number("RecipeTotalTimeoutMs") / 1000


def test_an_outline_answered_with_the_whole_recipe_is_a_shape_failure_served_whole(
    fake: FakeModel, parallel: Template
) -> None:
    fake.chat_by_section["outline"] = ChatBehaviour(kind="whole_recipe")
    outcome, _ = cooked(parallel, fake)
    served_whole_after(outcome, "shape")


def test_an_outline_that_stalls_after_its_titles_is_a_stall_served_whole(fake: FakeModel, parallel: Template) -> None:
    """The titles come, the steps sections start, then the outline says nothing past the idle limit (1 s): the
    stage closes every section and writes whole with the ~2 s left."""
    fake.chat_by_section["outline"] = ChatBehaviour(kind="titles_then_stall", stall_s=5)
    outcome, elapsed = cooked(parallel, fake)
    served_whole_after(outcome, "stall")
    idle_s = parallel.number("RecipeIdleTimeoutMs") / 1000
    assert idle_s <= elapsed < parallel.number("RecipeTotalTimeoutMs") / 1000
    assert {"steps:1-4"} <= {str(s) for s in fake.sections}  # the sections had started from the titles


def test_titles_that_outnumber_the_steps_are_a_merge_failure_served_whole(fake: FakeModel, parallel: Template) -> None:
    fake.chat_by_section["outline"] = ChatBehaviour(kind="extra_titles")
    outcome, _ = cooked(parallel, fake)
    served_whole_after(outcome, "merge")
    assert outcome.metrics.mergeFailure and "step orders" in outcome.metrics.mergeFailure


@pytest.mark.parametrize("section", ["outline", "steps"])
def test_a_lone_surrogate_in_a_core_section_is_replaced_not_a_crash(
    fake: FakeModel, parallel: Template, section: str
) -> None:
    fake.chat_by_section[section] = ChatBehaviour(kind="surrogate")
    outcome, _ = cooked(parallel, fake)
    assert outcome.error is None and outcome.result is not None, outcome.error
    assert outcome.metrics.wholeAfter is None and outcome.metrics.degraded is None
    dumped = outcome.result.model_dump_json()
    dumped.encode()  # UTF-8 carries every character of it
    assert "\ufffd" in outcome.result.model_dump_json() or "\\ufffd" in dumped


@pytest.mark.parametrize("section", ["extras", "imagePrompt"])
def test_a_lone_surrogate_in_a_degradable_section_drops_it(fake: FakeModel, parallel: Template, section: str) -> None:
    fake.chat_by_section[section] = ChatBehaviour(kind="surrogate")
    outcome, _ = cooked(parallel, fake)
    assert outcome.error is None and outcome.result is not None, outcome.error
    assert outcome.metrics.degraded == [section]
    outcome.result.model_dump_json().encode()


@pytest.mark.parametrize("kind", ["surrogate", "surrogate_delta"])
def test_a_lone_surrogate_in_a_whole_answer_is_replaced(fake: FakeModel, kind: str) -> None:
    """Escaped in the recipe's JSON text, or decoded from the event into the text itself (as OpenRouter's
    ``delta.content`` was reported to carry one)."""
    whole = Template({**SCALED, "RecipeSections": "whole"})
    fake.chat_script.append(ChatBehaviour(kind=kind))
    outcome, _ = cooked(whole, fake)
    assert outcome.error is None and outcome.result is not None, outcome.error
    assert outcome.result.name.startswith("\ufffd")
    outcome.result.model_dump_json().encode()
