"""``chuixiang seed``: in the running ``chuixiang cloud``, the job an event names."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from stack_template import ConfigError

from chuixiang_local.commands.common import CLOUD_STATE, progress


def cmd_seed(args: argparse.Namespace) -> int:
    """Create, in the running ``chuixiang cloud``, the job an event names (as ``invoke`` does before invoking)."""
    import boto3

    from chuixiang.settings import Settings
    from chuixiang.stores.jobs import JobStore
    from chuixiang_local.cloud.local_cloud import seed_job

    state_file = Path(args.state)
    if not state_file.exists():
        raise ConfigError("no local cloud is running: start `chuixiang cloud` first")
    state = json.loads(state_file.read_text())
    event = json.loads(Path(args.event).read_text())
    table = boto3.resource(
        "dynamodb",
        endpoint_url=state["endpoint"],
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",  # nosec B106  # moto
    ).Table(state["table"])
    created = seed_job(JobStore(Settings.model_validate({"JOBS_TABLE": state["table"]}), table), event)
    job = event.get("jobId") if isinstance(event, dict) else None
    progress(
        f"job {job} created RUNNING" if created else f"nothing to create (job {job} exists, or the event names none)"
    )
    return 0


def add_parser(sub: Any) -> None:
    """The command's arguments, under ``sub`` (the CLI's subparsers)."""
    p = sub.add_parser("seed", help="create, in the running `chuixiang cloud`, the job an event names")
    p.add_argument("-e", "--event", required=True, help="an event file, e.g. events/recipe.json")
    p.add_argument("--state", default=str(CLOUD_STATE), help="the file `chuixiang cloud --state` wrote")
    p.set_defaults(func=cmd_seed)
