"""``RecipeSections=auto`` on real sockets: a fresh stack learns which mode is faster for its model within four
jobs; the outline's steps ranges start while the outline is still written; parts that do not merge are written
again whole inside the total limit."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from stack_template import Template

from chuixiang.deadline import Budget
from chuixiang.generation.recipe import RecipeOutcome
from chuixiang.generation.recipe_job import RecipeJob
from chuixiang.generation.recipe_modes import write_recipe
from chuixiang.generation.sections import default_max_streams
from chuixiang.resilience.calls import Routes
from chuixiang.resilience.key_loans import PROBE_FIRST_S, KeyQuotas, Lender, MemoryKeyStore
from chuixiang.stores.key_streams import KeyLender
from chuixiang.timeouts import BY_PARAMETER
from chuixiang.upstream.endpoint import ModelEndpoint
from chuixiang_local.commands.routing_bench import limits
from chuixiang_local.loopback import loopback_client
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel, FakeModelProcess
from chuixiang_local.model.memory_health import MemoryHealth
from chuixiang_local.model.profiles import REAL_MS_PER_TOKEN

from ..support.scaled import SCALED
from ..support.stages import run_recipe
from ..support.waiting import wait_until

pytestmark = pytest.mark.long_module  # 15 s or more in all: scheduled first (tests/conftest.py)

#: Real seconds played this many times faster (a peak job: ~90 s whole, ~26 s in sections; here 2.3 s and 0.7 s).
SCALE = 40.0


@pytest.fixture(scope="module")
def profiles() -> Iterator[str]:
    """The fake model's measured profiles at the peak (each stream at its own speed) and on a capped key."""
    fake = FakeModelProcess(pace_s=REAL_MS_PER_TOKEN / 1000 / SCALE)
    try:
        yield fake.start()
    finally:
        fake.stop()


def job(base_url: str, model: str, health: MemoryHealth, lender: Lender | None = None) -> RecipeOutcome:
    """One job of a stack whose model health is ``health`` (the template's defaults, the ladder scaled), borrowing
    from its key through ``lender`` when given."""
    function_ms = BY_PARAMETER["RecipeFunctionTimeout"].default * 1000 / SCALE
    with loopback_client() as client:
        endpoint, routes = ModelEndpoint(base_url, model, None), Routes((model,), health_for=lambda _: health)
        return write_recipe(
            RecipeJob(client, endpoint, limits(SCALE), "红烧肉", Budget(function_ms, None), routes),
            setting="auto",
            max_streams=default_max_streams(),
            lender=lender,
        )


def modes_until(base_url: str, model: str, wanted: str, jobs: int = 4) -> list[str]:
    """The mode of each job of a fresh stack until one is ``wanted`` (at most ``jobs``), then one more."""
    health, modes = MemoryHealth(SCALE), list[str]()
    while len(modes) < jobs and wanted not in modes:
        outcome = job(base_url, model, health)
        assert outcome.error is None, outcome.error
        modes.append(outcome.metrics.mode or "")
    modes.append(job(base_url, model, health).metrics.mode or "")
    return modes


def test_sections_against_a_model_slow_in_each_stream(profiles: str) -> None:
    """At the peak each stream writes at ~18 tokens/s however many are open: sections from the first job (nothing
    measured: the default) and after it (measured: predicted ~3x faster)."""
    health = MemoryHealth(SCALE)
    first, second = job(profiles, "fake-evening", health), job(profiles, "fake-evening", health)
    assert (first.metrics.mode, second.metrics.mode) == ("parallel", "parallel")
    assert (first.metrics.modeReason or "").startswith("no recent measurement of fake-evening")
    assert "predicted parallel" in (second.metrics.modeReason or ""), second.metrics.modeReason
    # the streams wrote side by side: well over one stream's worth (how far over depends on how fast this
    # machine's fake keeps eleven streams at time x40; a capped key measures ~1)
    assert (health.read().key_streams_p50 or 0) >= 2


def test_whole_against_a_key_capped_across_its_streams_by_the_fourth_job(profiles: str) -> None:
    """A key capped at one stream's speed over all its streams: the first job's sections measure it, and from
    then on (by the fourth job at the latest) the recipe is written whole, and stays so."""
    modes = modes_until(profiles, "fake-capped", "whole")
    assert modes[0] == "parallel" and modes[-2:] == ["whole", "whole"] and len(modes) <= 5, modes


def test_the_steps_ranges_start_before_the_outline_ends(fake: FakeModel) -> None:
    """The fake writes the outline's name, main ingredients and titles first: every steps range is requested
    before the outline's answer has ended (it is still writing its ingredients' other groups and summary)."""
    fake.pace_s = 0.004  # the outline streams for ~1 s, its titles written within ~0.4 s of it
    template = Template({**SCALED, "RecipeSections": "parallel"})
    outcome, _ = run_recipe(template, fake.base_url, template.function_by_dir("recipe").timeout_s * 1000)
    assert outcome.error is None and outcome.result is not None, outcome.error
    # The fake records an answer once it has sent its last byte; the reader may be done a moment before.
    wait_until(lambda: any(section == "outline" for section, _ in fake.answered), timeout_s=5, what="the outline")
    outline_end = next(t for section, t in fake.answered if section == "outline")
    starts = {s: t for (path, t, _), s in zip(fake.requests, fake.sections, strict=True) if s and s != "outline"}
    ranges = {s: t for s, t in starts.items() if s.startswith("steps:")}
    assert len(ranges) == 6 and all(t < outline_end for t in ranges.values()), (outline_end, starts)
    assert starts["extras"] < outline_end and starts["imagePrompt"] < outline_end  # with the first range


def test_parts_that_do_not_merge_are_written_again_whole(fake: FakeModel) -> None:
    """The first steps range writes one step too few: the parts do not merge, and with the total limit's time
    left the recipe is written whole; every call is on the job's bill and its reason says what happened."""
    fake.chat_by_section["steps:1-4"] = ChatBehaviour(kind="step_short")
    template = Template({**SCALED, "RecipeSections": "parallel", "RecipeMaxStreams": "5"})
    outcome, _ = run_recipe(template, fake.base_url, template.function_by_dir("recipe").timeout_s * 1000)
    assert outcome.error is None and outcome.result is not None, outcome.error
    m = outcome.metrics
    assert m.mode == "whole" and m.mergeFailure and "step orders" in m.mergeFailure
    assert m.wholeAfter == "merge" and "abandoned (merge: step orders" in (m.modeReason or "")
    assert fake.sections[-1] is None  # the last request: the whole recipe
    assert [c.section for c in m.calls][-1] is None and len(m.calls) == 6  # 5 sections, then the whole
    assert m.tokensUsed == sum(c.tokens for c in m.calls)
    assert m.tokensWasted == sum(c.tokens for c in m.calls[:-1]) > 0  # the sections' answers, thrown away


def test_after_the_key_answers_429_the_next_jobs_borrow_nothing_until_a_probe(profiles: str) -> None:
    """A 429 on any call of the key says it is full: the next jobs borrow no streams (written whole, and say
    why), however fast sections were predicted, until the probe's wait (scaled) has passed."""
    health, store = MemoryHealth(SCALE), MemoryKeyStore()
    clock = [0.0]

    def lender(name: str) -> KeyLender:
        return KeyLender(store, KeyQuotas(jobs=100), name, 10**9, clock=lambda: clock[0])

    assert job(profiles, "fake-evening", health, lender("first")).metrics.mode == "parallel"
    with FakeModel(pace_s=0.0) as refusing:
        refusing.chat_by_model["fake-evening"] = ChatBehaviour(status=429)
        assert job(refusing.base_url, "fake-evening", health, lender("refused")).error is not None
    assert store.read().refused_at == 0.0 and store.read().loans == {}
    clock[0] = 30.0
    after = job(profiles, "fake-evening", health, lender("after"))
    assert after.error is None and after.metrics.mode == "whole"
    assert "refused a call 30 s ago" in (after.metrics.modeReason or ""), after.metrics.modeReason
    clock[0] = PROBE_FIRST_S
    probe = job(profiles, "fake-evening", health, lender("probe"))
    assert probe.error is None and probe.metrics.mode == "parallel" and store.read().refused_at is None


def test_a_job_admitted_with_one_stream_is_written_whole(profiles: str) -> None:
    """A job that may open one stream only is written whole, and says so."""
    from chuixiang.generation.mode_choice import ONE_STREAM

    health = MemoryHealth(SCALE)
    with loopback_client() as client:
        endpoint = ModelEndpoint(profiles, "fake-evening", None)
        routes = Routes(("fake-evening",), health_for=lambda _: health)
        budget = Budget(BY_PARAMETER["RecipeFunctionTimeout"].default * 1000 / SCALE, None)
        outcome = write_recipe(
            RecipeJob(client, endpoint, limits(SCALE), "红烧肉", budget, routes),
            setting="auto",
            max_streams=1,
        )
    assert outcome.error is None and outcome.metrics.mode == "whole" and outcome.metrics.modeReason == ONE_STREAM
