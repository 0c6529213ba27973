"""``chuixiang cloud``: the local cloud kept up on a fixed port for SAM's own local tools."""

from __future__ import annotations

import argparse
import signal
import threading
import time
from pathlib import Path
from typing import Any

from chuixiang_local.commands.common import CLOUD_STATE, WORK_DIR, account_quota, common, local_stack, progress


def cmd_cloud(args: argparse.Namespace) -> int:
    """Keep the local cloud up on a fixed port for SAM's local tools; write their env-vars file."""
    from chuixiang_local.commands.sam_env import write_files

    log_path = WORK_DIR / "logs" / f"cloud-{time.strftime('%Y%m%d-%H%M%S')}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    with open(log_path, "w", encoding="utf-8") as log, local_stack(args, log) as cloud:
        env_file, state_file = Path(args.env_vars), Path(args.state)
        write_files(cloud, env_file, state_file, args.host_address)
        progress(
            f"local cloud up: moto at {cloud.endpoint} (from a container: {args.host_address}); "
            f"function logs: {log_path}"
        )
        progress(
            f"env-vars file for SAM: {env_file}; then, e.g.:\n"
            f"  .venv/bin/chuixiang seed -e events/recipe.json\n"
            f"  sam local invoke RecipeFunction -e events/recipe.json --env-vars {env_file}\n"
            f"  sam local start-api --env-vars {env_file}\nCtrl-C stops it."
        )
        while not stopping.wait(0.5):
            pass
    state_file.unlink(missing_ok=True)
    progress("stopped")
    return 0


def add_parser(sub: Any) -> None:
    """The command's arguments, under ``sub`` (the CLI's subparsers)."""
    p = sub.add_parser("cloud", help="keep the local cloud up on a fixed port for `sam local invoke`/`start-api`")
    p.add_argument("--port", dest="cloud_port", type=int, default=4566, help="moto's port (default 4566)")
    p.add_argument("--model-port", type=int, default=8765, help="the embedded fake model's port")
    p.add_argument(
        "--bind",
        default="127.0.0.1",
        help="address moto and the fake model listen on; 0.0.0.0 lets containers on Linux reach them",
    )
    p.add_argument(
        "--host-address",
        default="host.docker.internal",
        help="how a container reaches this machine (written into the env-vars file)",
    )
    p.add_argument("--env-vars", default=str(WORK_DIR / "sam-env.json"), help="where to write SAM's env-vars file")
    p.add_argument("--state", default=str(CLOUD_STATE), help="where to say where the cloud runs (for `seed`)")
    account_quota(p)
    common(p)
    p.set_defaults(func=cmd_cloud)
