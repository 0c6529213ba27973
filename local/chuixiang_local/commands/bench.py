"""``chuixiang bench``: the same recipe request to several models, timed and checked, to choose with data.

Every (model, dish, run) goes through production's recipe generation: the same
prompt, stream reader, limits (from the template parameters after overrides),
validation and error codes. No local cloud is needed; calls run ``--concurrency``
at a time. Without ``--model-base-url`` the embedded fake model answers, and the
measured profiles (``fake-steady``, ``fake-peak`` …) are benched by default; their
timings are played ``time_scale`` times faster than real time, and the recipe
limits are scaled by the same factor (unless overridden) so the results keep
their meaning.
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from stack_template import Template

from chuixiang.clock import iso, now_utc
from chuixiang.deadline import Budget
from chuixiang.generation.call_figures import tokens_per_second
from chuixiang.generation.recipe import generate_recipe
from chuixiang.generation.recipe_call import RecipeLimits
from chuixiang.generation.recipe_job import RecipeJob
from chuixiang.resilience.calls import Routes
from chuixiang.settings import Settings
from chuixiang.timeouts import (
    RECIPE_FIRST_CONTENT,
    RECIPE_IDLE,
    RECIPE_MIN_ATTEMPT,
    RECIPE_RETRY_WINDOW,
    RECIPE_TOTAL,
)
from chuixiang.upstream.endpoint import ModelEndpoint
from chuixiang_local.loopback import loopback_client
from chuixiang_local.model.profiles import PROFILES

DEFAULT_DISHES = ("番茄炒蛋", "红烧肉")
#: The recipe limits a fake-time bench scales with the profiles (the rest are counts or unaffected).
SCALED_WITH_FAKE_TIME = (RECIPE_FIRST_CONTENT, RECIPE_IDLE, RECIPE_TOTAL, RECIPE_RETRY_WINDOW, RECIPE_MIN_ATTEMPT)


@dataclass
class BenchCall:
    """One (model, dish, run): what production would have recorded for it."""

    model: str
    dish: str
    run: int
    valid: bool
    code: str | None  #: the job's error code when not valid
    firstContentMs: int | None
    totalMs: int
    tokensPerSecond: float | None  #: completion tokens over the time from first content to the end
    maxGapMs: int | None
    finishReason: str | None
    completionTokens: int | None
    attempts: int
    detail: str = ""


def scaled_overrides(template: Template, scale: float, given: dict[str, str]) -> dict[str, str]:
    """The recipe limits scaled by ``scale`` (fake time), except those the user set."""
    out = {}
    for limit in SCALED_WITH_FAKE_TIME:
        if limit.parameter not in given:
            out[limit.parameter] = str(max(limit.minimum, round(template.number(limit.parameter) * scale)))
    return {**out, **given}


def bench_settings(template: Template, base_url: str) -> Settings:
    """The recipe function's settings as the template sets its environment, against ``base_url``."""
    env = template.function_by_dir("recipe").env
    return Settings.model_validate({**env, "MODEL_BASE_URL": base_url})


def one_call(
    client: httpx.Client, settings: Settings, model: str, dish: str, run: int, api_key: str | None, function_ms: float
) -> BenchCall:
    """``function_ms``: the recipe function's Timeout, as a fresh invocation would have it."""
    limits = RecipeLimits.from_settings(settings)
    endpoint = ModelEndpoint(settings.model_base_url, model, api_key)
    routes = Routes((model,))
    outcome = generate_recipe(RecipeJob(client, endpoint, limits, dish, Budget(function_ms, None), routes))
    m = outcome.metrics
    return BenchCall(
        model=model,
        dish=dish,
        run=run,
        valid=outcome.result is not None,
        code=outcome.error.code.value if outcome.error else None,
        firstContentMs=m.firstContentMs,
        totalMs=m.totalMs,
        tokensPerSecond=tokens_per_second(m),
        maxGapMs=m.maxGapMs,
        finishReason=m.finishReason,
        completionTokens=m.completionTokens,
        attempts=m.attempts,
        detail=outcome.error.detail[:200] if outcome.error else "",
    )


def run_bench(
    settings: Settings,
    models: Sequence[str],
    dishes: Sequence[str],
    runs: int,
    concurrency: int,
    api_key: str | None,
    function_ms: float,
    on_done: Callable[[BenchCall], None] | None = None,
) -> list[BenchCall]:
    """Every (model, dish, run), ``concurrency`` at a time; results in a stable order."""
    jobs = [(model, dish, run) for run in range(1, runs + 1) for model in models for dish in dishes]
    limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency)
    calls: list[BenchCall] = []
    with loopback_client(limits=limits) as client, ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(one_call, client, settings, m, d, r, api_key, function_ms) for m, d, r in jobs]
        for future in as_completed(futures):
            call = future.result()
            calls.append(call)
            if on_done:
                on_done(call)
    order = {job: i for i, job in enumerate(jobs)}
    return sorted(calls, key=lambda c: order[(c.model, c.dish, c.run)])


def percentile(values: Iterable[float], p: float) -> float | None:
    """Nearest-rank percentile (no interpolation between a handful of runs)."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def summarise(calls: Sequence[BenchCall], models: Sequence[str]) -> list[dict[str, Any]]:
    """One row per model, in the shape of ``--json``'s ``models``."""
    rows = []
    for model in models:
        mine = [c for c in calls if c.model == model]
        first = [c.firstContentMs for c in mine if c.firstContentMs is not None]
        rates = [c.tokensPerSecond for c in mine if c.tokensPerSecond is not None]
        gaps = [c.maxGapMs for c in mine if c.maxGapMs is not None]
        rows.append(
            {
                "model": model,
                "runs": len(mine),
                "valid": sum(c.valid for c in mine),
                "failures": dict(Counter(c.code for c in mine if c.code)),
                "firstContentMs": {"p50": percentile(first, 50), "p90": percentile(first, 90)},
                "totalMs": {
                    "p50": percentile([c.totalMs for c in mine], 50),
                    "p90": percentile([c.totalMs for c in mine], 90),
                },
                "tokensPerSecond": {"p50": percentile(rates, 50)},
                "maxGapMs": {"p90": percentile(gaps, 90)},
                "finishReasons": dict(Counter(c.finishReason or "none" for c in mine)),
            }
        )
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    def s(ms: float | None) -> str:
        return "-" if ms is None else f"{ms / 1000:.2f}"

    header = (
        f"{'model':<18} {'runs':>4} {'valid':>5}  {'first content p50/p90 s':>23}  {'total p50/p90 s':>15}  "
        f"{'tok/s p50':>9}  {'gap p90 s':>9}  failures / finish reasons"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        failures = ", ".join(f"{k} {v}" for k, v in r["failures"].items()) or "-"
        finish = ", ".join(f"{k} {v}" for k, v in r["finishReasons"].items())
        rate = r["tokensPerSecond"]["p50"]
        lines.append(
            f"{r['model']:<18} {r['runs']:>4} {r['valid']:>5}  "
            f"{s(r['firstContentMs']['p50']) + ' / ' + s(r['firstContentMs']['p90']):>23}  "
            f"{s(r['totalMs']['p50']) + ' / ' + s(r['totalMs']['p90']):>15}  "
            f"{'-' if rate is None else f'{rate:.0f}':>9}  {s(r['maxGapMs']['p90']):>9}  {failures} / {finish}"
        )
    return "\n".join(lines)


def limit_lines(settings: Settings) -> dict[str, float]:
    """The limits a reader of the chart compares the times with (ms)."""
    return {
        "first content": RECIPE_FIRST_CONTENT.of(settings),
        "idle": RECIPE_IDLE.of(settings),
        "total": RECIPE_TOTAL.of(settings),
    }


def write_outputs(
    out_dir: Path, document: dict[str, Any], calls: Sequence[BenchCall], settings: Settings
) -> list[Path]:
    """``bench.json`` (= ``--json``), ``calls.csv`` (one line per call) and ``bench.png``."""
    from chuixiang_local.commands.bench_chart import draw

    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, csv_path, png_path = out_dir / "bench.json", out_dir / "calls.csv", out_dir / "bench.png"
    json_path.write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    with open(csv_path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(asdict(calls[0])) if calls else ["model"])
        writer.writeheader()
        writer.writerows(asdict(c) for c in calls)
    draw(png_path, document["models"], calls, limit_lines(settings))
    return [json_path, csv_path, png_path]


def document(
    rows: list[dict[str, Any]], parameters: dict[str, str], started_at: str, extra: dict[str, Any]
) -> dict[str, Any]:
    return {"models": rows, "parameters": parameters, "startedAt": started_at, **extra}


def started_at() -> str:
    return iso(now_utc())


def api_key_from_env() -> str | None:
    return os.environ.get("MODEL_API_KEY") or None


def default_models() -> list[str]:
    return [name for name, profile in PROFILES.items() if profile.bench_default]


def progress_bar(total: int) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, file=sys.stderr, unit="call", desc="bench", leave=True)
