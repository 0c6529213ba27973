"""``RecipeSections`` ``whole`` and ``parallel``, compared over models that replay the write-up's measurements.

Each scenario is one model, every job run in both modes through the production recipe stage
(``generate_recipe`` or ``write_in_sections``: the stream reader, the router, the limits):

* ``peak``: ``fake-evening``, the production model at the evening peak as one stream was measured (first
  content 6.2 s, ~18 tokens/s, pauses up to 4.1 s); each stream at that speed however many are open, as
  hosted APIs batch requests;
* ``off-peak``: ``fake-offpeak`` (first content 2-4 s, a whole recipe in 19-32 s);
* ``capped key``: ``fake-capped``, a provider that caps a key's tokens/s over all its streams (18 tokens/s):
  the case where writing sections side by side gains nothing. One job at a time, so the cap is the job's;
* ``2 at once`` (1 and 4 users): the peak model behind a key that takes 2 requests at once and answers 429
  beyond (many providers cap a new key's concurrency; Moonshot's tier 0 takes 1). With 4 users the stack states
  ``RecipeKeyStreams=2``, as docs/admission.md asks: admission runs 2 jobs at once, the others wait in line;
* ``TPM at admission`` (1 and 4 users): the peak model behind a key whose tokens per minute are counted when a
  request is admitted, prompt + ``max_tokens`` (OpenAI's and Azure's way), 30,000 a minute (OpenAI's usage
  tier 1 for gpt-4o), unstated to the stack.

``auto`` jobs borrow through a key lender as production's do (one per scenario: its loans and its refusals);
``parallel`` writes in sections whatever the key has spare (its sections still yield to a whole answer).

Time runs ``--scale`` times faster (the fake plays real seconds that much faster; every limit is divided by
the same factor); figures are printed in real seconds. With ``--model-base-url`` and ``--models`` the jobs go
to real models in real time, what an operator runs before changing the default.

    .venv/bin/chuixiang bench --sections [--runs 8] [--chart docs/sections-bench.png]
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, cast

import httpx

from chuixiang.deadline import Budget
from chuixiang.generation.progress import ProgressReporter
from chuixiang.generation.recipe import RecipeOutcome
from chuixiang.generation.recipe_call import RecipeLimits
from chuixiang.generation.recipe_job import RecipeJob
from chuixiang.generation.recipe_modes import SectionsSetting, write_recipe
from chuixiang.generation.sections import default_max_streams, whole_reservation
from chuixiang.observability import logger
from chuixiang.resilience.calls import Routes
from chuixiang.resilience.health import HealthStore
from chuixiang.resilience.key_loans import KeyQuotas, Lender, MemoryKeyStore
from chuixiang.schemas import PartialRecipe, Progress
from chuixiang.stores.key_streams import KeyLender
from chuixiang.timeouts import BY_PARAMETER
from chuixiang.upstream.endpoint import ModelEndpoint
from chuixiang_local.commands.bench import percentile
from chuixiang_local.commands.charts import pyplot
from chuixiang_local.commands.routing_bench import limits as scaled_limits
from chuixiang_local.loopback import loopback_client
from chuixiang_local.model.fake_model import FakeModelProcess
from chuixiang_local.model.key_quota import KeyQuota
from chuixiang_local.model.memory_health import MemoryHealth
from chuixiang_local.model.profiles import REAL_MS_PER_TOKEN


@dataclass(frozen=True)
class Scenario:
    """A model, the users at once, the key's quotas as the provider enforces them (None: none), and what the
    stack states of them (``RecipeKeyStreams``: admission runs at most that many jobs at once)."""

    model: str
    users: int = 2
    quota: KeyQuota | None = None
    stated_streams: int = 0


#: OpenAI's usage tier 1 for gpt-4o: 30,000 tokens a minute, counted at admission.
TIER1_TPM = 30_000
SCENARIOS = {
    "peak": Scenario("fake-evening"),
    "off-peak": Scenario("fake-offpeak"),
    "capped key": Scenario("fake-capped", users=1),
    "2 at once, 1 user": Scenario("fake-evening", users=1, quota=KeyQuota(max_open=2)),
    "2 at once, 4 users": Scenario("fake-evening", users=4, quota=KeyQuota(max_open=2), stated_streams=2),
    "TPM at admission, 1 user": Scenario("fake-evening", users=1, quota=KeyQuota(tokens_per_minute=TIER1_TPM)),
    "TPM at admission, 4 users": Scenario("fake-evening", users=4, quota=KeyQuota(tokens_per_minute=TIER1_TPM)),
}
#: The scenarios of a key's quotas, whose goal is that no job is lost.
QUOTA_SCENARIOS = tuple(name for name, sc in SCENARIOS.items() if sc.quota is not None)
MODES = ("whole", "parallel", "auto")
DISHES = ("番茄炒蛋", "红烧肉", "宫保鸡丁", "鱼香肉丝")
#: How often the bench looks at what a polling user would see (in the bench's own, scaled, time).
LOOK_EVERY_S = 0.02


@dataclass
class SectionsJob:
    """One job in one mode: what production recorded, in real milliseconds."""

    scenario: str
    mode: str
    run: int
    valid: bool
    code: str | None
    totalMs: int
    ingredientsMs: int | None  #: when a poll first showed the name, summary and ingredients
    stepsKnownMs: int | None  #: when a poll first showed every step (its title, or in whole mode its text)
    promptTokens: int
    cachedPromptTokens: int
    completionTokens: int
    calls: int
    degraded: list[str] | None
    outlineMs: int | None = None  #: the outline's end (parallel)
    slowestSectionMs: int | None = None  #: the longest section after the outline, start to end (parallel)
    streamSeconds: float = 0.0  #: the seconds of every stream held, summed: what a concurrent-stream quota sees
    mostStreams: int = 1  #: the most streams open at once
    chosen: str | None = None  #: the mode that wrote it (``auto`` chose it)
    mergeFailed: bool = False  #: its sections did not merge (it was then written whole, time allowing)
    wholeAfter: str | None = None  #: why its sections gave way to a whole answer (None: they did not)


class Looks:
    """What a polling user would have seen, and when (a progress reporter's writes, timed)."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.ingredients_at: float | None = None
        self.titles_at: float | None = None

    def write(self, progress: Progress, partial: PartialRecipe | None) -> bool:
        now = time.monotonic() - self.started
        if partial and "ingredients" in partial and self.ingredients_at is None:
            self.ingredients_at = now
        if partial and "stepTitles" in partial and self.titles_at is None:
            self.titles_at = now
        return True


def one_job(
    client: httpx.Client,
    base_url: str,
    model: str,
    mode: str,
    dish: str,
    limits: RecipeLimits,
    function_ms: float,
    health: HealthStore | None = None,
    lender: Lender | None = None,
) -> tuple[RecipeOutcome, Looks, float]:
    """(the outcome, what a poll showed when, the seconds it took) of one job in ``mode`` (``auto`` chooses from
    ``health``, which its jobs add to; the others measure nothing)."""
    started = time.monotonic()
    looks = Looks(started)
    reporter = ProgressReporter(looks.write, interval_s=LOOK_EVERY_S, expected_tokens=1600)
    routes = Routes((model,), health_for=lambda _: health)
    with reporter:
        endpoint = ModelEndpoint(base_url, model, None)
        outcome = write_recipe(
            RecipeJob(client, endpoint, limits, dish, Budget(function_ms, None), routes, reporter),
            setting=cast(SectionsSetting, mode),
            max_streams=default_max_streams(),
            lender=lender,
        )
    return outcome, looks, time.monotonic() - started


def record(scenario: str, mode: str, run: int, done: tuple[RecipeOutcome, Looks, float], scale: float) -> SectionsJob:
    outcome, looks, seconds = done
    m = outcome.metrics

    def real_ms(at: float | None) -> int | None:
        return None if at is None else int(at * scale * 1000)

    steps_known = looks.titles_at if m.mode == "parallel" else (seconds if outcome.result else None)
    sections = m.sections or []
    later = [x for x in sections if x.name != "outline"]
    spans = [(x.startMs, x.endMs) for x in sections] or [(0, m.totalMs)]
    return SectionsJob(
        scenario=scenario,
        mode=mode,
        run=run,
        valid=outcome.result is not None,
        code=outcome.error.code.value if outcome.error else None,
        totalMs=int(seconds * scale * 1000),
        ingredientsMs=real_ms(looks.ingredients_at),
        stepsKnownMs=real_ms(steps_known),
        promptTokens=sum(c.promptTokens or 0 for c in m.calls),
        cachedPromptTokens=sum(c.cachedPromptTokens or 0 for c in m.calls),
        completionTokens=sum(c.completionTokens or 0 for c in m.calls),
        calls=len(m.calls),
        degraded=m.degraded,
        outlineMs=int(sections[0].endMs * scale) if sections else None,
        slowestSectionMs=int(max(x.endMs - x.startMs for x in later) * scale) if later else None,
        streamSeconds=round(sum(end - start for start, end in spans) * scale / 1000, 1),
        mostStreams=max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans),
        chosen=m.mode,
        mergeFailed=m.mergeFailure is not None,
        wholeAfter=m.wholeAfter,
    )


def run_scenario(
    base_url: str,
    scenario: str,
    model: str,
    runs: int,
    concurrency: int,
    scale: float,
    limits: RecipeLimits,
    stated_streams: int = 0,
) -> list[SectionsJob]:
    """``runs`` jobs in each mode, ``concurrency`` at a time (jobs alternate modes, so both see the same load);
    ``auto``'s borrow through one lender, whose clock runs ``scale`` times faster, as the fake does."""
    function_ms = BY_PARAMETER["RecipeFunctionTimeout"].default * 1000 / scale
    plan = [(mode, run) for run in range(runs) for mode in MODES]
    lock, jobs = threading.Lock(), []
    health = MemoryHealth(scale)  # a fresh stack's: auto's first jobs find nothing measured
    keys = MemoryKeyStore()
    jobs_at_once = min(concurrency, stated_streams) if stated_streams else 100
    quotas = KeyQuotas(streams=stated_streams, jobs=jobs_at_once, whole_tokens=whole_reservation(3000).total)
    started = time.monotonic()

    def key_clock() -> float:
        """The key's clock in real seconds: the fake plays ``scale`` times faster."""
        return (time.monotonic() - started) * scale

    def go(mode: str, run: int) -> None:
        with loopback_client() as client:  # each call sets its own timeouts (the stream reader)
            dish = DISHES[run % len(DISHES)]
            mine = health if mode == "auto" else None
            lender = None
            if mode == "auto":
                deadline = key_clock() + function_ms * scale / 1000
                lender = KeyLender(keys, quotas, f"{mode}-{run}", deadline, key_clock)
            done = one_job(client, base_url, model, mode, dish, limits, function_ms, mine, lender)
        with lock:
            jobs.append(record(scenario, mode, run, done, scale))

    with ThreadPoolExecutor(max_workers=min(concurrency, jobs_at_once)) as pool:
        for future in [pool.submit(go, mode, run) for mode, run in plan]:
            future.result()
    return sorted(jobs, key=lambda j: (MODES.index(j.mode), j.run))


def summarise(jobs: Sequence[SectionsJob]) -> list[dict[str, Any]]:
    """One row per (scenario, mode)."""
    rows = []
    for scenario in dict.fromkeys(j.scenario for j in jobs):
        for mode in MODES:
            mine = [j for j in jobs if j.scenario == scenario and j.mode == mode]
            valid = [j for j in mine if j.valid]
            prompt = statistics.mean(j.promptTokens for j in valid) if valid else None
            cached = statistics.mean(j.cachedPromptTokens for j in valid) if valid else None
            rows.append(
                {
                    "scenario": scenario,
                    "mode": mode,
                    "runs": len(mine),
                    "valid": len(valid),
                    "lost": len(mine) - len(valid),
                    "wholeAfter": sum(1 for j in mine if j.wholeAfter),
                    "totalMs": {"p50": _p(valid, "totalMs", 50), "p95": _p(valid, "totalMs", 95)},
                    "ingredientsMs": {"p50": _p(mine, "ingredientsMs", 50)},
                    "stepsKnownMs": {"p50": _p(mine, "stepsKnownMs", 50)},
                    "promptTokens": round(prompt) if prompt is not None else None,
                    "cachedPromptShare": round(cached / prompt, 2) if prompt and cached is not None else None,
                    "completionTokens": round(statistics.mean(j.completionTokens for j in valid)) if valid else None,
                    "degraded": sum(1 for j in mine if j.degraded),
                    "outlineMs": {"p50": _p(valid, "outlineMs", 50)},
                    "slowestSectionMs": {"p50": _p(valid, "slowestSectionMs", 50)},
                    "streamSeconds": {"p50": _p(valid, "streamSeconds", 50)},
                    "mostStreams": max((j.mostStreams for j in valid), default=None),
                    "requests": max((j.calls for j in valid), default=None),
                    "chosen": {c: sum(1 for j in mine if j.chosen == c) for c in ("whole", "parallel")},
                    "mergeFailures": sum(1 for j in mine if j.mergeFailed),
                }
            )
    return rows


def _p(jobs: Sequence[SectionsJob], key: str, p: float) -> float | None:
    return percentile([v for j in jobs if (v := getattr(j, key)) is not None], p)


def s(ms: float | None) -> str:
    """Milliseconds as seconds to a tenth (``-``: none measured)."""
    return "-" if ms is None else f"{ms / 1000:.1f}"


def table(rows: Sequence[dict[str, Any]]) -> str:
    header = (
        f"{'scenario':<26} {'mode':<9} {'valid':>6} {'lost':>4}  {'recipe p50/p95 s':>16}  {'ingredients p50 s':>17}  "
        f"{'steps known p50 s':>17}  {'tokens in (cached) / out':>24}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        share = r["cachedPromptShare"]
        tokens = f"{r['promptTokens']} ({share:.0%}) / {r['completionTokens']}" if r["promptTokens"] else "-"
        lines.append(
            f"{r['scenario']:<26} {r['mode']:<9} {str(r['valid']) + '/' + str(r['runs']):>6} {r['lost']:>4}  "
            f"{s(r['totalMs']['p50']) + ' / ' + s(r['totalMs']['p95']):>16}  {s(r['ingredientsMs']['p50']):>17}  "
            f"{s(r['stepsKnownMs']['p50']):>17}  {tokens:>24}"
        )
    return "\n".join(lines)


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The bench's rows as the table ``docs/sections.md`` shows (``make docs``)."""
    out = [
        "| scenario | mode | valid | lost | written whole after sections | recipe p50 / p95 s "
        "| ingredients readable p50 s | every step known p50 s | prompt tokens (cached) | written tokens |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['scenario']} | {r['mode']} | {r['valid']}/{r['runs']} | {r['lost']} | {r['wholeAfter']} "
            f"| {s(r['totalMs']['p50'])} / "
            f"{s(r['totalMs']['p95'])} | {s(r['ingredientsMs']['p50'])} | {s(r['stepsKnownMs']['p50'])} "
            f"| {_tokens_in(r)} | {r['completionTokens']} |"
        )
    return "\n".join(out)


def _tokens_in(r: dict[str, Any]) -> str:
    return f"{r['promptTokens']} ({r['cachedPromptShare']:.0%})" if r["promptTokens"] else "-"


def _peak(rows: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The peak's (whole, parallel) rows."""
    peak = {r["mode"]: r for r in rows if r["scenario"] == "peak"}
    return peak["whole"], peak["parallel"]


#: Users' jobs as ``docs/capacity.md`` counts them: each user starts one every this many seconds.
JOB_EVERY_S = 180


def streams_table(rows: Sequence[dict[str, Any]], users: Sequence[int] = (1000, 10_000)) -> str:
    """What a provider's quotas see at the peak, per mode (Little's law: streams at once = jobs per second x
    stream-seconds per job), for ``users`` each starting a job every :data:`JOB_EVERY_S` s."""
    w, p = _peak(rows)
    head = " | ".join(f"{n:,} users (whole → parallel)".replace(",", " ") for n in users)
    out = [f"| at the peak, per job | whole | parallel | {head} |", "|---|---|---|" + "---|" * len(users)]

    def per(n: int, value: float) -> str:
        return f"{n / JOB_EVERY_S * value:,.0f}".replace(",", " ")

    rpm = [f"{per(n, w['requests'] * 60)} → {per(n, p['requests'] * 60)}" for n in users]
    held = [f"{per(n, w['streamSeconds']['p50'])} → {per(n, p['streamSeconds']['p50'])}" for n in users]
    out.append(
        f"| model requests (per minute at N users) | {w['requests']} | {p['requests']} | " + " | ".join(rpm) + " |"
    )
    out.append(
        f"| stream-seconds (streams at once at N users) | {w['streamSeconds']['p50']:.0f} | "
        f"{p['streamSeconds']['p50']:.0f} | " + " | ".join(held) + " |"
    )
    out.append(f"| most streams open at once | {w['mostStreams']} | {p['mostStreams']} |" + " |" * len(users))
    return "\n".join(out)


def ladder_line(rows: Sequence[dict[str, Any]], total_ms: float) -> str:
    """What sections need of the recipe limits, measured at the peak, for ``docs/ladder.md``."""
    _, p = _peak(rows)
    total, outline, slowest = (p[k]["p50"] / 1000 for k in ("totalMs", "outlineMs", "slowestSectionMs"))
    return (
        f"Written in sections (`auto` at the peak, or `parallel`) the stage ends with its last stream: at the peak "
        f"(`chuixiang bench --sections`, p50) {total:.1f} s, the outline written in {outline:.1f} s and the slowest "
        f"section in {slowest:.1f} s from its own start (each steps range starts as its titles are written, before "
        f"the outline ends), inside `RecipeTotalTimeoutMs` ({total_ms / 1000:.0f} s). Every call of the stage has its "
        "deadline at that one total from the stage's start, never the total again after the outline, and a recipe "
        "written again whole after its sections did not merge keeps the same deadline: the rungs above it stand "
        "as they are in every mode."
    )


def _modes(rows: Sequence[dict[str, Any]], scenario: str) -> dict[str, dict[str, Any]]:
    return {r["mode"]: r for r in rows if r["scenario"] == scenario}


def _sec(row: dict[str, Any], key: str = "totalMs", p: str = "p50") -> float:
    value = row[key][p]
    return float("inf") if value is None else float(value) / 1000


def _verdict(ok: bool) -> str:
    return "met" if ok else "**not met**"


def goals(rows: Sequence[dict[str, Any]]) -> str:
    """The default setup's (``auto``) figures against the goals set for it (``docs/sections.md``)."""
    peak, off, capped = (_modes(rows, s) for s in ("peak", "off-peak", "capped key"))
    auto, whole = peak["auto"], peak["whole"]
    present = dict.fromkeys(r["scenario"] for r in rows)
    ratios = {s: _sec(_modes(rows, s)["auto"]) / _sec(_modes(rows, s)["whole"]) for s in present}
    worst = max(ratios, key=lambda s: ratios[s])
    written = auto["completionTokens"] / whole["completionTokens"] - 1
    merges = sum(r["mergeFailures"] for r in rows if r["mode"] == "auto")
    jobs = sum(r["runs"] for r in rows if r["mode"] == "auto")
    first = _sec(auto, "ingredientsMs")
    return "\n".join(
        [
            "| goal (the defaults: `auto`) | measured | |",
            "|---|---|---|",
            f"| the peak: p50 to the recipe ≤ 30 s, p95 ≤ 40 s | {_sec(auto):.1f} s, p95 {_sec(auto, p='p95'):.1f} s "
            f"(whole {_sec(whole):.1f} s) | {_verdict(_sec(auto) <= 30 and _sec(auto, p='p95') <= 40)} |",
            f"| the peak: first readable part ≤ 12 s | {first:.1f} s (whole {_sec(whole, 'ingredientsMs'):.1f} s) "
            f"| {_verdict(first <= 12)} |",
            f"| off-peak ≤ 15 s | {_sec(off['auto']):.1f} s (whole {_sec(off['whole']):.1f} s) "
            f"| {_verdict(_sec(off['auto']) <= 15)} |",
            f"| a capped key ≤ 1.05 × whole | {ratios['capped key']:.2f} × ({_sec(capped['auto']):.1f} s, whole "
            f"{_sec(capped['whole']):.1f} s) | {_verdict(ratios['capped key'] <= 1.05)} |",
            f"| never more than 5 % slower than whole | worst {ratios[worst]:.2f} × ({worst}) "
            f"| {_verdict(ratios[worst] <= 1.05)} |",
            f"| written tokens within +10 % | {written:+.1%} | {_verdict(written <= 0.10)} |",
            *_quota_goals(rows),
            f"| parts that did not merge | {merges} of {jobs} jobs | stated |",
            f"| prompt tokens, stated | {auto['promptTokens']} a recipe ({auto['cachedPromptShare']:.0%} a cached "
            f"prefix), whole {whole['promptTokens']} ({whole['cachedPromptShare']:.0%}) | stated |",
        ]
    )


def _quota_goals(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One goal row per key's quota scenario: no job lost, and p50 within 1.05 x whole's."""
    out = []
    for scenario in QUOTA_SCENARIOS:
        modes = _modes(rows, scenario)
        if not modes:
            continue
        auto, whole = modes["auto"], modes["whole"]
        ratio = _sec(auto) / _sec(whole)
        lost = {m: r["lost"] for m, r in modes.items()}
        said = ", ".join(f"{m} {n}" for m, n in lost.items())
        out.append(
            f"| {scenario}: 0 of {auto['runs']} jobs lost, p50 ≤ 1.05 × whole | lost: {said}; {ratio:.2f} × "
            f"({_sec(auto):.1f} s, whole {_sec(whole):.1f} s) | {_verdict(auto['lost'] == 0 and ratio <= 1.05)} |"
        )
    return out


def load(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(path.read_text())["rows"]
    return rows


def _mark(ax: Any, x: range, ms: list[float | None], color: str, label: str) -> None:
    """A short horizontal mark per bar at ``ms`` (seconds on the chart)."""
    ax.scatter(x, [(v or 0) / 1000 for v in ms], marker="_", s=600, color=color, zorder=3, label=label)


def draw(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    plt = pyplot()

    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    fig, axes = plt.subplots(1, len(scenarios), figsize=(4.2 * len(scenarios), 3.6), squeeze=False)
    for ax, scenario in zip(axes[0], scenarios, strict=True):
        mine = [r for r in rows if r["scenario"] == scenario]
        x = range(len(mine))
        ax.bar(x, [(r["totalMs"]["p50"] or 0) / 1000 for r in mine], color="tab:blue", label="recipe p50")
        ax.scatter(x, [(r["totalMs"]["p95"] or 0) / 1000 for r in mine], color="black", zorder=3, label="recipe p95")
        _mark(ax, x, [r["ingredientsMs"]["p50"] for r in mine], "tab:orange", "ingredients readable p50")
        _mark(ax, x, [r["stepsKnownMs"]["p50"] for r in mine], "tab:green", "every step known p50")
        ax.set_xticks(list(x), [r["mode"] for r in mine])
        ax.set_title(f"{scenario}: seconds")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _scenario_jobs(url: str, name: str, sc: Scenario, runs: int, scale: float, pace_s: float) -> list[SectionsJob]:
    """A scenario's jobs: on the shared fake, or on a fake of its own whose key has the scenario's quotas (a fresh
    key: its minute and its requests at once its own), the minute scaled as the fake's time is."""
    limits = scaled_limits(scale)
    if sc.quota is None:
        return run_scenario(url, name, sc.model, runs, sc.users, scale, limits, sc.stated_streams)
    quota = replace(
        sc.quota, minute_s=sc.quota.minute_s / scale, busy_retry_after_s=sc.quota.busy_retry_after_s / scale
    )
    keyed = FakeModelProcess(pace_s=pace_s, key_quota=quota)
    try:
        return run_scenario(keyed.start(), name, sc.model, runs, sc.users, scale, limits, sc.stated_streams)
    finally:
        keyed.stop()


def main(
    runs: int,
    chart: str = "",
    *,
    scale: float = 20.0,
    concurrency: int = 2,
    base_url: str = "",
    models: Sequence[str] = (),
    out: str = "",
) -> list[dict[str, Any]]:
    """Bench both modes; print the table, write the chart and (``out``) the jobs and rows as JSON."""
    logger.setLevel("WARNING")  # one line per call is the product's, not the bench's
    pace_s = REAL_MS_PER_TOKEN / 1000 / scale
    fake = None if base_url else FakeModelProcess(pace_s=pace_s)
    scenarios = {m: Scenario(m, users=concurrency) for m in models} if base_url else SCENARIOS
    url = base_url or (fake.start() if fake else "")
    effective = 1.0 if base_url else scale
    jobs: list[SectionsJob] = []
    try:
        for name, sc in scenarios.items():
            if name == "peak" or name == "off-peak":
                sc = replace(sc, users=concurrency)
            jobs += _scenario_jobs(url, name, sc, runs, effective, pace_s)
    finally:
        if fake:
            fake.stop()
    rows = summarise(jobs)
    where = f"real models at {base_url}" if base_url else f"fake models, time x{scale:g} (figures in real seconds)"
    print(f"{runs} jobs per mode and scenario, {where}, the production ladder")
    print(table(rows))
    if chart:
        draw(Path(chart), rows)
        print(f"chart: {chart}")
    if out:
        Path(out).write_text(
            json.dumps({"rows": rows, "jobs": [asdict(j) for j in jobs]}, ensure_ascii=False, indent=1)
        )
    return rows
