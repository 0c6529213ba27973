"""``chuixiang cost``: what 1 000 jobs cost on AWS, from the template and the calls counted locally."""

from __future__ import annotations

import argparse
import json
from typing import Any

from stack_template import Template, parse_overrides

from chuixiang_local.commands.common import common, progress
from chuixiang_local.commands.ladder import check_or_raise


def cmd_cost(args: argparse.Namespace) -> int:
    from chuixiang_local.commands.cost import Assumptions, render, report

    overrides = parse_overrides(args.parameter_overrides)
    check_or_raise(Template(overrides))
    progress("running a generated, a cached and a failed job on the local cloud to count their AWS calls…")
    doc = report(
        overrides,
        Assumptions(recipe_seconds=args.recipe_seconds, image_seconds=args.image_seconds, image_mb=args.image_mb),
    )
    print(json.dumps(doc, ensure_ascii=False, indent=2) if args.json else render(doc))
    return 0


def add_parser(sub: Any) -> None:
    """The command's arguments, under ``sub`` (the CLI's subparsers)."""
    p = sub.add_parser(
        "cost",
        help="AWS cost per 1 000 jobs (generated, cached, failed) from the template "
        "and AWS calls counted on the local cloud",
    )
    p.add_argument("--recipe-seconds", type=float, default=86.0, help="production recipe stream time (default 86)")
    p.add_argument("--image-seconds", type=float, default=30.0, help="production image generation time")
    p.add_argument("--image-mb", type=float, default=1.5, help="stored and downloaded image size")
    p.add_argument("--json", action="store_true", help="the figures and the measured counts as JSON")
    common(p, model=False)
    p.set_defaults(func=cmd_cost)
