"""The worker zygote roots and a command root, around a command or a block: ``python -m
chuixiang_local.workers.with_roots CMD...`` runs ``CMD`` with ``CHUIXIANG_ZYGOTE_ROOT`` naming the worker roots, so
every local cloud it starts (a ``chuixiang serve`` the Node tiers start, say) forks its pools' zygotes from them
instead of loading boto3, Powertools and pydantic in each (~0.35 s of CPU a zygote, four or five a ``serve``), and
``CHUIXIANG_COMMAND_ROOT`` naming the command root, which ``python -m chuixiang_local.commands.launch`` asks for its
command (~1.5 s of CPU less a ``serve``). Run under roots already, it runs ``CMD`` under the same ones. A pool or a
command they would not give fresh starts its own (:mod:`chuixiang_local.workers.zygote_root`): nothing run under
them behaves otherwise.
"""

from __future__ import annotations

import contextlib
import os
import subprocess  # nosec B404  # the command the caller asked for
import sys
from collections.abc import Iterator, Mapping

from chuixiang_local.workers.invoker import runner_env
from chuixiang_local.workers.zygote_root import COMMAND_ROOT_VARIABLE, ROOT_VARIABLE, ZygoteRoot


@contextlib.contextmanager
def worker_roots() -> Iterator[str]:
    """The two roots a local cloud's pools ask, loaded as they load (one as a local cloud's pools, output buffered;
    one unbuffered, as ``serve``'s API process's pool): the value of :data:`ROOT_VARIABLE` while they live."""
    with (
        ZygoteRoot(runner_env()) as buffered,
        ZygoteRoot({**runner_env(), "PYTHONUNBUFFERED": "1"}) as unbuffered,
    ):
        yield os.pathsep.join([buffered.path, unbuffered.path])


@contextlib.contextmanager
def all_roots(env: Mapping[str, str], cwd: str | None = None) -> Iterator[dict[str, str]]:
    """The worker roots and a command root loaded with ``env`` in ``cwd``: ``env`` with both named, while they
    live."""
    with worker_roots() as roots:
        named = {**env, ROOT_VARIABLE: roots}
        with ZygoteRoot(named, kind="command", cwd=cwd) as commands:
            yield {**named, COMMAND_ROOT_VARIABLE: commands.path}


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python -m chuixiang_local.workers.with_roots COMMAND [ARG...]")
    if ROOT_VARIABLE in os.environ and COMMAND_ROOT_VARIABLE in os.environ:  # under roots already: the same ones
        os.execvp(sys.argv[1], sys.argv[1:])  # nosec B606 B607  # the caller's command
    with all_roots(os.environ) as env:
        command = subprocess.Popen(sys.argv[1:], env=env)  # nosec B603  # the caller's
        try:
            code = command.wait()
        except KeyboardInterrupt:  # Ctrl-C reached the command too (one foreground group): its own end is ours
            code = command.wait()
    sys.exit(code if code >= 0 else 128 - code)  # killed by a signal: a shell's 128 + its number


if __name__ == "__main__":
    main()
