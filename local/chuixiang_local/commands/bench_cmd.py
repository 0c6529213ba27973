"""``chuixiang bench``: the recipe request to several models (or the routing and sections comparisons)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from stack_template import ConfigError, Template, parse_overrides

from chuixiang.observability import logger
from chuixiang.settings import comma_list
from chuixiang_local.commands.common import WORK_DIR, common, progress
from chuixiang_local.model.fake_model import FakeModel


def cmd_bench(args: argparse.Namespace) -> int:
    from chuixiang_local.commands import bench

    if args.routing:
        from chuixiang_local.commands import routing_bench

        routing_bench.main(args.jobs, args.chart)
        return 0
    if args.sections:
        from chuixiang_local.commands import sections_bench

        if args.model_base_url and not args.models:
            raise ConfigError("--models is required with --model-base-url")
        sections_bench.main(
            args.runs if args.runs > 1 else 8,
            args.chart,
            concurrency=args.concurrency,
            base_url=args.model_base_url or "",
            models=list(comma_list(args.models or "")),
            out=args.json_out,
        )
        return 0

    given = parse_overrides(args.parameter_overrides)
    models = list(comma_list(args.models or ""))
    dishes = list(comma_list(args.dishes or "")) or list(bench.DEFAULT_DISHES)
    if args.runs < 1 or args.concurrency < 1:
        raise ConfigError("--runs and --concurrency must be at least 1")
    fake: FakeModel | None = None
    extra: dict[str, Any] = {}
    overrides = given
    base_url = args.model_base_url
    if not base_url:
        models = models or bench.default_models()
        fake = FakeModel(pace_s=args.fake_pace_ms / 1000)
        base_url = fake.start()
        overrides = bench.scaled_overrides(Template(), fake.time_scale, given)
        extra["fakeTimeScale"] = round(fake.time_scale, 4)
        progress(
            f"embedded fake model at {base_url}: profiles play {1 / fake.time_scale:.0f}x faster than "
            f"real time, recipe limits scaled alike"
        )
    elif not models:
        raise ConfigError("--models is required with --model-base-url")
    template = Template(overrides)
    settings = bench.bench_settings(template, base_url)
    started = bench.started_at()
    bar = bench.progress_bar(len(models) * len(dishes) * args.runs)
    failed = 0

    def done(call: bench.BenchCall) -> None:
        nonlocal failed
        failed += not call.valid
        bar.set_postfix(failed=failed)
        bar.update()

    logger.setLevel("WARNING")  # one log line per call would mix with the table; calls.csv has them all
    function_ms = template.function_by_dir("recipe").timeout_s * 1000
    try:
        calls = bench.run_bench(
            settings, models, dishes, args.runs, args.concurrency, bench.api_key_from_env(), function_ms, done
        )
    finally:
        bar.close()
        if fake:
            fake.stop()
    rows = bench.summarise(calls, models)
    parameters = {
        p: str(template.parameters[p])
        for p in sorted(template.parameters)
        if p.startswith("Recipe") and p not in ("RecipeModel", "RecipeFallbackModels")
    }
    doc = bench.document(rows, parameters, started, {"dishes": dishes, **extra})
    written = bench.write_outputs(Path(args.out), doc, calls, settings)
    if args.json:
        print(json.dumps(doc, ensure_ascii=False))
    else:
        print(bench.table(rows))
        if fake:
            print(
                f"(fake time: the profiles and the recipe limits run {1 / fake.time_scale:.1f}x faster than real "
                "time; multiply times by that, divide tokens/s)"
            )
    progress("wrote " + ", ".join(str(p) for p in written))
    return 0


def add_parser(sub: Any) -> None:
    """The command's arguments, under ``sub`` (the CLI's subparsers)."""
    p = sub.add_parser("bench", help="send the recipe request to several models; time and check every answer")
    p.add_argument(
        "--models",
        help="comma-separated models (default, offline: the embedded profiles fake-steady, "
        "fake-peak, fake-late-start, fake-broken-json, fake-length, fake-thinker)",
    )
    p.add_argument("--dishes", help="comma-separated dishes (default: 番茄炒蛋,红烧肉)")
    p.add_argument("--runs", type=int, default=1, help="runs of every (model, dish)")
    p.add_argument("--concurrency", type=int, default=4, help="calls at once")
    p.add_argument("--json", action="store_true", help="print exactly one JSON document on stdout")
    p.add_argument("--out", default=str(WORK_DIR / "bench"), help="directory for bench.json, calls.csv, bench.png")
    p.add_argument(
        "--routing",
        action="store_true",
        help="compare RecipeRouting ordered and fastest and hedging over the write-up's measured models "
        "(off-peak, peak, a queued primary), offline, time scaled down",
    )
    p.add_argument(
        "--sections",
        action="store_true",
        help="compare RecipeSections whole and parallel over the write-up's peak, off-peak and a key capped in "
        "tokens/s (offline, time scaled down; --runs jobs per mode, default 8), or over --models at --model-base-url",
    )
    p.add_argument("--jobs", type=int, default=20, help="with --routing: jobs per scenario and strategy")
    p.add_argument("--chart", default="", help="with --routing or --sections: where to draw the chart (PNG)")
    p.add_argument("--json-out", default="", help="with --sections: write every job and the summary here (JSON)")
    common(p)
    p.set_defaults(func=cmd_bench, fake_pace_ms=3.0)
