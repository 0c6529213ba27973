"""What every command shares: the progress line, the local stack a command runs on, and the options for it."""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
from collections.abc import Iterator
from typing import TextIO

from stack_template import REPO_ROOT, Template, parse_overrides

from chuixiang_local.cloud.concurrency import DEFAULT_QUOTA
from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.commands.ladder import check_or_raise
from chuixiang_local.model.fake_model import FakeModelProcess

WORK_DIR = REPO_ROOT / ".chuixiang"
#: Where ``chuixiang cloud`` says where it runs (``chuixiang seed`` reads it).
CLOUD_STATE = WORK_DIR / "cloud.json"


def progress(msg: str) -> None:
    print(f"[chuixiang] {msg}", file=sys.stderr, flush=True)


#: ``serve``'s function workers yield the CPU to the API and the local cloud (see ``LocalCloud``).
SERVE_WORKER_NICE = 10


@contextlib.contextmanager
def local_stack(args: argparse.Namespace, log: TextIO | None) -> Iterator[LocalCloud]:
    """Ladder check, then the fake model (unless a URL is given), then the local cloud."""
    overrides = parse_overrides(args.parameter_overrides)
    check_or_raise(Template(overrides))
    fake: FakeModelProcess | None = None
    base_url = args.model_base_url
    bind = getattr(args, "bind", "127.0.0.1")
    if not base_url:
        fake = FakeModelProcess(pace_s=args.fake_pace_ms / 1000, host=bind, port=getattr(args, "model_port", 0))
        base_url = fake.start()
        progress(f"embedded fake model at {base_url} ({args.fake_pace_ms} ms per chunk)")
    cloud = LocalCloud(
        overrides,
        model_base_url=base_url,
        work_dir=WORK_DIR,
        log=log,
        worker_nice=SERVE_WORKER_NICE if args.command == "serve" else 0,
        front_door_first=args.command == "serve" and args.front_door_first,
        port=getattr(args, "cloud_port", 0),
        bind=bind,
        account_concurrency=getattr(args, "account_concurrency", DEFAULT_QUOTA),
    )
    try:
        cloud.start()
        # What the start loaded (modules, botocore's models, moto's backends) lives as long as this process: frozen,
        # no collection walks it again (a young collection over it paused serve's threads for 0.4-0.7 s).
        gc.freeze()
        yield cloud
    finally:
        cloud.stop()
        if fake:
            fake.stop()


def account_quota(p: argparse.ArgumentParser) -> None:
    """``--account-concurrency``: the quota the state machine's invocations are throttled at."""
    p.add_argument(
        "--account-concurrency",
        type=int,
        default=DEFAULT_QUOTA,
        metavar="N",
        help=f"the AWS account's Lambda concurrent-executions quota (default {DEFAULT_QUOTA}; some "
        "new accounts get 10): the state machine's invocations beyond it are throttled as Lambda "
        "throttles them",
    )


def common(p: argparse.ArgumentParser, model: bool = True) -> None:
    """``--parameter-overrides``, and the model to talk to (the embedded fake by default)."""
    p.add_argument(
        "--parameter-overrides", nargs="+", metavar="KEY=VALUE", help="template parameters, as for `sam deploy`"
    )
    if model:
        p.add_argument(
            "--model-base-url",
            help="OpenAI-compatible base URL (default: embedded fake model); MODEL_API_KEY is sent as the bearer token",
        )
        p.add_argument("--fake-pace-ms", type=float, default=2.0, help="fake model delay between chunks")
