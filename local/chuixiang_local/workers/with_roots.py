"""The worker zygote roots, around a command or a block: ``python -m chuixiang_local.workers.with_roots CMD...`` runs
``CMD`` with ``CHUIXIANG_ZYGOTE_ROOT`` naming them, so every local cloud it starts (a ``chuixiang serve`` the Node
tiers start, say) forks its pools' zygotes from them instead of loading boto3, Powertools and pydantic in each
(~0.35 s of CPU a zygote, four or five a ``serve``). A pool whose zygotes they would not give fresh starts its own
(:mod:`chuixiang_local.workers.zygote_root`): nothing run under them behaves otherwise.
"""

from __future__ import annotations

import contextlib
import os
import subprocess  # nosec B404  # the command the caller asked for
import sys
from collections.abc import Iterator

from chuixiang_local.workers.invoker import runner_env
from chuixiang_local.workers.zygote_root import ROOT_VARIABLE, ZygoteRoot


@contextlib.contextmanager
def worker_roots() -> Iterator[str]:
    """The two roots a local cloud's pools ask, loaded as they load (one as a local cloud's pools, output buffered;
    one unbuffered, as ``serve``'s API process's pool): the value of :data:`ROOT_VARIABLE` while they live."""
    with (
        ZygoteRoot(runner_env()) as buffered,
        ZygoteRoot({**runner_env(), "PYTHONUNBUFFERED": "1"}) as unbuffered,
    ):
        yield os.pathsep.join([buffered.path, unbuffered.path])


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python -m chuixiang_local.workers.with_roots COMMAND [ARG...]")
    with worker_roots() as roots:
        command = subprocess.Popen(sys.argv[1:], env={**os.environ, ROOT_VARIABLE: roots})  # nosec B603  # the caller's
        try:
            code = command.wait()
        except KeyboardInterrupt:  # Ctrl-C reached the command too (one foreground group): its own end is ours
            code = command.wait()
    sys.exit(code if code >= 0 else 128 - code)  # killed by a signal: a shell's 128 + its number


if __name__ == "__main__":
    main()
