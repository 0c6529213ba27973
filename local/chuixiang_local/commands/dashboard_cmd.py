"""``chuixiang dashboard``: the template's dashboard drawn from the metrics local runs emitted."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from stack_template import Template, parse_overrides

from chuixiang_local.commands.common import WORK_DIR, progress


def cmd_dashboard(args: argparse.Namespace) -> int:
    from chuixiang_local.commands import dashboard

    paths = [Path(p) for p in args.logs] or [WORK_DIR / "logs"]
    widgets = dashboard.build(Template(parse_overrides(args.parameter_overrides)), dashboard.read_points(paths))
    print(dashboard.report(widgets))
    metric = [w for w in widgets if w.kind == "metric"]
    empty = [w for w in metric if not w.has_data]
    print(f"{len(metric) - len(empty)} of {len(metric)} metric widgets have data (from {', '.join(map(str, paths))})")
    if args.out:
        dashboard.draw(widgets, Path(args.out))
        progress(f"wrote {args.out}")
    return 1 if args.strict and empty else 0


def add_parser(sub: Any) -> None:
    """The command's arguments, under ``sub`` (the CLI's subparsers)."""
    p = sub.add_parser(
        "dashboard",
        help="the template's dashboard drawn from the metrics local runs emitted (the EMF in their logs)",
    )
    p.add_argument("--logs", nargs="*", default=[], help="log files or folders (default .chuixiang/logs)")
    p.add_argument("--out", help="draw it to this PNG")
    p.add_argument("--strict", action="store_true", help="exit 1 when a metric widget has no data")
    p.add_argument("--parameter-overrides", nargs="*", default=[], metavar="KEY=VALUE")
    p.set_defaults(func=cmd_dashboard)
