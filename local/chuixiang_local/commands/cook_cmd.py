"""``chuixiang cook``: one job end to end on the local cloud, printed as the client would see it."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from chuixiang_local.commands.common import WORK_DIR, common, local_stack, progress
from chuixiang_local.commands.watch import JobWatch
from chuixiang_local.gateway.api_client import LocalApi


def cmd_cook(args: argparse.Namespace) -> int:
    log_path = WORK_DIR / "logs" / f"cook-{time.strftime('%Y%m%d-%H%M%S')}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w", encoding="utf-8") as log, local_stack(args, log) as cloud:
        progress(f"local cloud up (moto at {cloud.endpoint}); function logs: {log_path}")
        api = LocalApi(cloud)
        status, body = api.post_dish(args.dish)
        if status != 202:
            print(json.dumps(body, ensure_ascii=False, indent=2))
            progress(f"POST /recipes -> {status} {body['error']['code']}: {body['error'].get('reason')}")
            return 2 if status == 400 else 1
        progress(f"POST /recipes -> 202 job {body['jobId']}")
        watch = JobWatch()
        try:
            doc = api.wait(body["jobId"], cloud.template.number("ClientGiveUpSeconds"), on_doc=watch)
        finally:
            watch.close()
    print(json.dumps(doc, ensure_ascii=False, indent=2) if args.json else _summary(doc))
    return 0 if doc.get("status") == "SUCCEEDED" else 1


def _summary(doc: dict[str, Any]) -> str:
    lines = [f"{doc['dish']}: {doc['status']}"]
    if doc.get("error"):
        lines.append(f"  error: {doc['error']['code']} - {doc['error']['message']}")
    recipe = doc.get("recipe")
    if recipe:
        lines.append(f"  {recipe['summary']}")
        lines += [f"  {s['order']}. {s['text']}" for s in recipe["steps"]]
    if doc.get("image"):
        lines.append(f"  image: {doc['image']['url']}")
    if doc.get("imageError"):
        lines.append(f"  image error: {doc['imageError']['code']} - {doc['imageError']['message']}")
    lines.append(f"  metrics: {json.dumps(doc.get('metrics'), ensure_ascii=False)}")
    return "\n".join(lines)


def add_parser(sub: Any) -> None:
    """The command's arguments, under ``sub`` (the CLI's subparsers)."""
    p = sub.add_parser("cook", help="run one job end to end")
    p.add_argument("dish")
    p.add_argument("--json", action="store_true", help="print the job document as JSON")
    common(p)
    p.set_defaults(func=cmd_cook)
