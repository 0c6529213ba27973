"""ordered, fastest and hedging, compared over models that replay the write-up's measurements.

Each scenario is three recipe candidates served by the fake model, every request drawing its figures from
the measured ranges (seeded, so a run repeats):

* ``gpt``: the production model, ~1 600 tokens in 21-34 s off-peak (first content 2-4 s), 80-92 s at the
  evening peak (first content 6-10 s);
* ``fast``: twice as fast, but it often (40 %) spends ``max_tokens`` on reasoning and writes no recipe;
* ``late``: valid, but its first content comes after 57 s off-peak and 107 s at peak (past the limit);
* ``queued``: the same three, the late-starting model configured first (57-107 s before it writes).

Each strategy runs the production recipe stage (``generate_recipe``: the stream reader, retries, the
routing, the hedge) against them with the production ladder and budget, time scaled down ``SCALE``
times (the fake plays real seconds that much faster; every limit is divided by the same factor). The
figures printed are in real seconds. Every model's health is first measured by three canary probes per
model, as the hourly canary does, then by each job's calls (an in-memory store with the table's histograms).

    .venv/bin/chuixiang bench --routing [--jobs 20] [--chart docs/routing-bench.png]
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from chuixiang.deadline import Budget
from chuixiang.generation.recipe import generate_recipe
from chuixiang.generation.recipe_call import RecipeLimits
from chuixiang.generation.recipe_job import RecipeJob
from chuixiang.observability import logger
from chuixiang.resilience.calls import Routes
from chuixiang.resilience.fastest import FastestFirst
from chuixiang.resilience.hedge import Hedge, HedgeBudget
from chuixiang.resilience.retry import RetryPolicy
from chuixiang.timeouts import BY_PARAMETER
from chuixiang.upstream.chat_reader import StreamLimits
from chuixiang.upstream.endpoint import ModelEndpoint
from chuixiang_local.commands.charts import pyplot
from chuixiang_local.loopback import loopback_client
from chuixiang_local.model.fake_model import FakeModel
from chuixiang_local.model.memory_health import MemoryHealth
from chuixiang_local.model.profiles import PROFILES, REAL_MS_PER_TOKEN, ModelProfile

SCALE = 40.0  #: real seconds played this many times faster
EXPECTED_TOKENS = 1600
SCENARIOS: dict[str, tuple[ModelProfile, ...]] = {
    "off-peak": (
        ModelProfile("bench-gpt-offpeak", 2.0, 1600 / 19, first_content_s_max=4.0, tokens_per_s_min=1600 / 32),
        ModelProfile("bench-fast", 1.0, 100.0, tokens_per_s_min=70.0, length_share=0.4),
        ModelProfile("bench-late", 57.0, 30.0, first_content_s_max=58.0),
    ),
    "peak": (
        ModelProfile("bench-gpt-peak", 6.0, 1600 / 74, first_content_s_max=10.0, tokens_per_s_min=1600 / 86),
        ModelProfile("bench-fast", 1.0, 100.0, tokens_per_s_min=70.0, length_share=0.4),
        ModelProfile("bench-late", 107.0, 30.0, first_content_s_max=110.0),
    ),
    "queued": (
        ModelProfile("bench-queued", 57.0, 30.0, first_content_s_max=107.0),
        ModelProfile("bench-gpt-offpeak", 2.0, 1600 / 19, first_content_s_max=4.0, tokens_per_s_min=1600 / 32),
        ModelProfile("bench-fast", 1.0, 100.0, tokens_per_s_min=70.0, length_share=0.4),
    ),
}


@dataclass
class Result:
    ok: int = 0
    seconds: list[float] = field(default_factory=list)
    tokens: int = 0


def limits(scale: float = SCALE) -> RecipeLimits:
    """The production recipe limits (the template's defaults), divided by ``scale``."""
    ms = {
        p: BY_PARAMETER[p].default / scale
        for p in (
            "RecipeFirstContentTimeoutMs",
            "RecipeIdleTimeoutMs",
            "RecipeTotalTimeoutMs",
            "RecipeRetryWindowMs",
            "RecipeMinAttemptMs",
        )
    }
    return RecipeLimits(
        total_ms=ms["RecipeTotalTimeoutMs"],
        stream=StreamLimits(
            first_content_s=ms["RecipeFirstContentTimeoutMs"] / 1000,
            idle_s=ms["RecipeIdleTimeoutMs"] / 1000,
            max_chunks=10**6,
        ),
        retry=RetryPolicy(
            max_attempts=2,
            window_ms=ms["RecipeRetryWindowMs"],
            min_attempt_ms=ms["RecipeMinAttemptMs"],
            base_backoff_s=0.5 / scale,
        ),
        max_tokens=3000,
    )


def run(strategy: str, models: tuple[str, ...], fake: FakeModel, jobs: int) -> Result:
    health = {m: MemoryHealth(SCALE) for m in models}
    budget_ms = BY_PARAMETER["RecipeFunctionTimeout"].default * 1000 / SCALE
    hedge_budget = HedgeBudget()
    out = Result()
    with loopback_client() as client:
        for model in models * 3:  # the canary's probes: every model measured before the first job
            endpoint = ModelEndpoint(fake.base_url, model, None)
            probe = Routes((model,), health_for=health.get)
            generate_recipe(RecipeJob(client, endpoint, limits(), "番茄炒蛋", Budget(budget_ms, None), probe))
        for _ in range(jobs):
            fastest = (
                FastestFirst({m: health[m].read() for m in models}, EXPECTED_TOKENS) if strategy == "fastest" else None
            )
            hedge = (
                Hedge(BY_PARAMETER["RecipeHedgeAfterMs"].default / SCALE, hedge_budget)
                if strategy == "hedging"
                else None
            )
            endpoint = ModelEndpoint(fake.base_url, models[0], None)
            routes = Routes(models, health_for=health.get, fastest=fastest, hedge=hedge)
            done = generate_recipe(RecipeJob(client, endpoint, limits(), "番茄炒蛋", Budget(budget_ms, None), routes))
            out.tokens += done.metrics.tokensUsed
            if done.result is not None:
                out.ok += 1
                out.seconds.append(done.metrics.totalMs * SCALE / 1000)
    return out


def main(jobs: int, chart: str = "") -> None:
    logger.setLevel("WARNING")  # one line per call is the product's, not the bench's
    rows: list[tuple[str, str, float, float, float, float]] = []
    for scenario, profiles in SCENARIOS.items():
        for p in profiles:
            PROFILES[p.name] = p
        models = tuple(p.name for p in profiles)
        for strategy in ("ordered", "fastest", "hedging"):
            with FakeModel(pace_s=REAL_MS_PER_TOKEN / 1000 / SCALE) as fake:
                r = run(strategy, models, fake, jobs)
            p50 = statistics.median(r.seconds) if r.seconds else float("nan")
            p95 = sorted(r.seconds)[max(0, round(0.95 * len(r.seconds)) - 1)] if r.seconds else float("nan")
            per = r.tokens / r.ok if r.ok else float("nan")
            rows.append((scenario, strategy, r.ok / jobs, p50, p95, per))
    print(f"{jobs} jobs per row, time x{SCALE:g} (figures in real seconds), production ladder and budget")
    print(f"  {'scenario':<9} {'strategy':<8} {'success':>8} {'p50 s':>7} {'p95 s':>7} {'tokens/recipe':>14}")
    for scenario, strategy, ok, p50, p95, per in rows:
        print(f"  {scenario:<9} {strategy:<8} {ok:>8.0%} {p50:>7.1f} {p95:>7.1f} {per:>14.0f}")
    if chart:
        plt = pyplot()

        fig, axes = plt.subplots(1, len(SCENARIOS), figsize=(4 * len(SCENARIOS), 3.5))
        for ax, scenario in zip(axes, SCENARIOS, strict=True):
            mine = [r for r in rows if r[0] == scenario]
            ax.bar([r[1] for r in mine], [r[3] for r in mine], label="p50")
            ax.scatter([r[1] for r in mine], [r[4] for r in mine], color="black", zorder=3, label="p95")
            ax.set_title(f"{scenario}: seconds to a recipe")
            for i, row in enumerate(mine):
                ax.annotate(f"{row[2]:.0%} ok", (i, row[3]), ha="center", va="bottom")
        axes[0].legend()
        fig.tight_layout()
        fig.savefig(chart, dpi=80)
        print(f"chart: {chart}")
