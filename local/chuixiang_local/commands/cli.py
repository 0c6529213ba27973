"""``chuixiang``: cook a dish, serve the API, invoke one function, check the ladder - locally.

Exit codes: 0 success (SUCCEEDED), 1 the job FAILED (or a function errored),
2 bad usage or configuration (including a broken timeout ladder).
"""

from __future__ import annotations

import argparse
import os
import sys

from stack_template import ConfigError

from chuixiang_local.cloud.moto_patches import EngineError
from chuixiang_local.commands import (
    bench_cmd,
    cloud_cmd,
    cook_cmd,
    cost_cmd,
    ctrl_c,
    dashboard_cmd,
    invoke_cmd,
    ladder_cmd,
    seed_cmd,
    serve_cmd,
)


def parser() -> argparse.ArgumentParser:
    """Every command's arguments, each from its own module."""
    ap = argparse.ArgumentParser(
        prog="chuixiang", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    for command in (
        cook_cmd,
        serve_cmd,
        invoke_cmd,
        bench_cmd,
        cost_cmd,
        dashboard_cmd,
        cloud_cmd,
        seed_cmd,
        ladder_cmd,
    ):
        command.add_parser(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    code = _run(parser().parse_args(argv))
    return 130 if ctrl_c.pressed() else code  # a Ctrl-C that something caught and made another ending is still one


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"chuixiang: configuration error: {exc}", file=sys.stderr)
        return 2
    except EngineError as exc:
        print(f"chuixiang: local engine error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def entry() -> None:
    """The ``chuixiang`` command: ``main``, then exit without tearing the interpreter down. Every local
    resource is stopped by then (workers killed, servers shut, logs flushed); what is left is
    collecting moto's and botocore's millions of objects, about a second for nothing."""
    ctrl_c.install()
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
