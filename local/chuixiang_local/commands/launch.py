"""``python -m chuixiang_local.commands.launch ARG...``: ``chuixiang ARG...`` forked by the command root that
``CHUIXIANG_COMMAND_ROOT`` names (:mod:`chuixiang_local.workers.zygote_root`), as the pipeline tests fork theirs;
without one, or where it would not give a fresh command, run here as ``python -m chuixiang_local.commands.cli``
runs it (this process becomes it).

The Node tiers start ``serve`` this way under ``with_roots``: a fork skips the ~1.5 s of CPU a fresh command spends
importing the runner and moto and loading their models. This process stands in for the command it asked for: the
signals it gets are passed on (SIGTERM drains a ``serve``), and it ends as the command ended (killed by a signal: by
the same signal, as a shell would see it). Killed itself, it leaves nothing running: the root ends a command whose
asker is gone. Only the root's client is imported before the fork is asked for (~50 ms of CPU).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import NoReturn

from chuixiang_local.workers.zygote_root import ForkedZygote, RootRefused, fork_command

#: The module ``python -m`` runs for a command.
CLI = "chuixiang_local.commands.cli"
#: Passed on to the fork. SIGINT only when the fork is in another process group: a terminal's Ctrl-C reaches a
#: fork in ours already, and a second one stops ``serve`` without its drain.
PASSED_ON = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def main(argv: list[str]) -> NoReturn:
    try:
        forked = fork_command(argv, dict(os.environ), [0, 1, 2], os.getcwd())
    except RootRefused as refused:
        print(f"chuixiang {' '.join(argv[:1])} not forked: {refused}", file=sys.stderr)
        forked = None
    if forked is None:
        os.execv(sys.executable, [sys.executable, "-m", CLI, *argv])  # nosec B606  # our own CLI, the caller's args
    pass_signals_on(forked)
    end_as(forked.wait())


def pass_signals_on(forked: ForkedZygote) -> None:
    def passed_on(number: int, _frame: object) -> None:
        forked.send_signal(number)

    for number in PASSED_ON:
        signal.signal(number, passed_on)
    if os.getpgid(forked.pid) != os.getpgrp():
        signal.signal(signal.SIGINT, passed_on)
    else:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the fork got it too, and ends as it decides


def end_as(code: int) -> NoReturn:
    """Exit with the fork's status: its code, or killed by the same signal."""
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        sys.exit(128 - code)  # a signal whose default is to go on: a shell's 128 + its number
    sys.exit(code)


if __name__ == "__main__":
    main(sys.argv[1:])
