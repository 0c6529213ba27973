"""``chuixiang invoke``: one function with one event, like ``sam local invoke``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from chuixiang_local.commands.common import common, local_stack, progress


def cmd_invoke(args: argparse.Namespace) -> int:
    event = json.loads(Path(args.event).read_text()) if args.event else {}
    with local_stack(args, sys.stderr) as cloud:
        spec = cloud.template.function_by_dir(args.function)
        cloud.api_url = args.api_url  # the template's execute-api URL names nothing here
        cloud.seed_job_for(event)
        result = cloud.invoke(spec, event)
    print(json.dumps(result.payload, ensure_ascii=False, indent=2))
    progress(
        f"{spec.logical_id}: {'error ' + str(result.error_type) if result.failed else 'ok'} in {result.duration_ms} ms"
    )
    return 1 if result.failed else 0


def add_parser(sub: Any) -> None:
    """The command's arguments, under ``sub`` (the CLI's subparsers)."""
    p = sub.add_parser("invoke", help="invoke one function, like `sam local invoke`")
    p.add_argument("function", help="recipe | image | submit | api | reconcile | canary | synthetic (or a logical id)")
    p.add_argument("-e", "--event", help="event JSON file (events/*.json)")
    p.add_argument(
        "--api-url", help="the API a function calls as a client does (synthetic): a running `chuixiang serve`"
    )
    common(p)
    p.set_defaults(func=cmd_invoke)
